"""The model of DESIGN §2: sites, their power and links, and the paper's equations (pure)."""
