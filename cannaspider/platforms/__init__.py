"""Menu platforms: each platform's package (`dutchie/`), and what any platform's area search shares
(`geography.py`)."""
