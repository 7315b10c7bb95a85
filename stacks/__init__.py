"""Composition of the components into whole environments, driven by validated stack config."""
