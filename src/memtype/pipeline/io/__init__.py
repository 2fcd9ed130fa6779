"""What goes in and out of a run: file-name patterns and plates, the sources read, the
outputs written (OME-Zarr, TIFF, object storage), tables, the plate overview, inspection."""
