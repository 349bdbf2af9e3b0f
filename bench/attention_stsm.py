"""Session 37: the staged O written into shared memory four pairs a stmatrix (ops.h `store` of an f32
accumulator into a 16-bit tile, converted first) against a pair an st.shared (`sts`: the source with
TILES_NO_STMATRIX, what ring_store's first measurements ran), the D = 128 forward non-causal at
S = 512 / 1k / 2k (ring_store launched). The outputs must be bitwise equal.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_stsm.py
"""
import attention_split as split

VARIANTS = {"sts": lambda src: "#define TILES_NO_STMATRIX 1  // a pair a st.shared\n" + src}

if __name__ == "__main__":
    split.main(VARIANTS, shapes=(512, 1024, 2048), suite=True)
