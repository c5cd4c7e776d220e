//! (filled in by the part's stages)
