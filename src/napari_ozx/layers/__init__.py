"""napari-aware, Qt-free mapping between the OME model and napari layers.

* :mod:`.provenance`: :class:`~.provenance.LayerSource`, where a layer came from;
* :mod:`.reading`: model -> napari layer data;
* :mod:`.writing`: napari layer data -> image / label specs for the writer;
* :mod:`.export`: export plans, estimates and remembered options.

Nothing is imported here: ``import napari_ozx.layers.provenance`` costs only that module.
"""
