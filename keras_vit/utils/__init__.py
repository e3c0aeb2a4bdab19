"""Leaf helpers every room may use: argument checks, Keras registration, the
one adapter to Keras internals, the one atomic file writer and docstrings
assembled from shared argument texts. They import Keras and NumPy only."""
