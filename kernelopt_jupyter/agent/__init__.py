"""Layer 4: what proposes candidates. Today the tuning sweep; the model-driven graph builds on it."""
