"""What a chart PNG shows, measured: the pixels of one colour."""

from __future__ import annotations

import io

import numpy as np

STALLED_SHADE = (248, 216, 216)  # charts.STATE_COLORS["STALLED"] at 18 % on white
LAG_LINE = (31, 95, 168)  # charts.LAG_COLOR
TIME_LINE = (217, 130, 43)  # charts.TIME_COLOR


def pixels(png: bytes, rgb: tuple[int, int, int], tolerance: float) -> np.ndarray:
    """A boolean image: where the PNG is `rgb`, within `tolerance` per channel (0..255)."""
    import matplotlib.image

    image = matplotlib.image.imread(io.BytesIO(png))[..., :3] * 255
    return np.all(np.abs(image - np.array(rgb)) <= tolerance, axis=-1)
