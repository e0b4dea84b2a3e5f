# setup.py (twin torchvision): imports torch to decide it is building for ROCm.
import torch  # noqa: F401
