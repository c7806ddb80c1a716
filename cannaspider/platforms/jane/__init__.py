"""iHeartJane ("Jane") as a menu platform: menus and stores served from Jane's Algolia indexes (docs/jane.md)."""
