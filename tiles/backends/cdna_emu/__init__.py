"""backend="cdna-emu": CDNA kernels run on an NVIDIA GPU through an emulated arch layer (tests only)."""
