"""One spider per role: store_discovery, entry_point_discovery, product_discovery, product_resync."""
