"""Hopper (sm_90a) backend: device headers, fragment layouts, NVRTC/driver runtime, templates."""
