"""SpatialData's non-raster elements (points, shapes) and the store's element listing.

Nothing here knows napari: points and shapes are read into numpy arrays and pyarrow
tables (:mod:`.points`, :mod:`.shapes`); :mod:`.elements` lists a store's elements and
reads their coordinate transformations.
"""
