"""Session 27: the SASS around a PC of the scales_tma kernel, as this machine's NVRTC compiles it."""
import pathlib, subprocess, sys, tempfile
from tiles.backends.hopper import lower_fp8, runtime
opts = eval(sys.argv[1]); pc = int(sys.argv[2], 16)
k = lower_fp8.fp8_source("bf16", **opts)
c = runtime.compile_cuda(k["source"], name=k["name"] + ".cu")
p = pathlib.Path(tempfile.mkdtemp()) / "k.cubin"; p.write_bytes(c.cubin)
lines = subprocess.run(["cuobjdump", "-sass", str(p)], capture_output=True, text=True).stdout.splitlines()
for i, l in enumerate(lines):
    if f"/*{pc:04x}*/" in l:
        for m in lines[max(0, i - 40):i + 6]:
            if m.strip().startswith("/*") and "*/" in m[:20]:
                print(m.split(";")[0].strip())
print("nvrtc", runtime.nvrtc_version())
