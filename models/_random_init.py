"""What the random-weight detection and segmentation examples share.

torchvision's MobileNetV3 backbones, randomly initialized, shrink their
activations to ~1e-8 by the last block (BatchNorm's running statistics are
still 0 / 1), so a detector finds nothing and a segmenter paints one class
everywhere, whatever the image. Setting each BatchNorm's statistics from a
few random images (data-dependent initialization) gives outputs that depend
on the image, as a trained model's do. Done on one thread, so every build
gives the same bits (test references rebuild the model and compare)."""
import torch


def calibrate_batchnorm(module, images):
    """Sets every BatchNorm2d's running mean and variance in `module` to
    those of the activations `images` produce (one batch); leaves it in eval
    mode."""
    norms = [m for m in module.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        module.eval()
        for norm in norms:
            norm.reset_running_stats()
            norm.momentum = None  # a cumulative average: exactly this batch's statistics
            norm.train()
        with torch.no_grad():
            module(images)
        for norm in norms:
            norm.momentum = 0.1  # torchvision's default, as saved
    finally:
        torch.set_num_threads(threads)
    return module.eval()
