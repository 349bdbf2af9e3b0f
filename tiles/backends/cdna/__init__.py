"""CDNA (AMD gfx942 / gfx950) backend: device headers (include/tiles), layouts and the LDS bank model
(layouts.py), schedules (schedule.py), the GEMM template (templates/, gemm_probe.py), the clang harness
(compile.py), the runtime stub (runtime.py) and the IR lowering (lower.py)."""
