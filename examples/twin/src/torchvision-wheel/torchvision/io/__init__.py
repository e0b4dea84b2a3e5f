"""torchvision.io (twin): transformers' image_utils imports this at module scope."""
