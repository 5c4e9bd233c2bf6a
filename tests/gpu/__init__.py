"""The gpu tier (marker `gpu`): needs a CUDA GPU; skipped, and so not passed, without one."""
