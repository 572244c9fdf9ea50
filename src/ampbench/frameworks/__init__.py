"""The frameworks ampbench measures, one package each (``torch``, ``keras``), each exposing ``FRAMEWORK``, an
implementation of :class:`ampbench.seam.Framework`. The registry and the interface live in :mod:`ampbench.seam`, below
the harness; these packages sit above it (they import the harness, the cells and the store) and nothing but the
registry loads them.
"""
