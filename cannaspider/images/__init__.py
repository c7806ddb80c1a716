"""Product images: where they are stored, how a download becomes a webp, how /img renders them
(docs/images.md)."""
