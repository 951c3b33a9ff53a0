"""One region, one resolution: a ROI of an image as its own layers (:mod:`.crop`,
``open_roi``), and the pyramid level a layer is shown from (:mod:`.resolution`)."""
