"""LRO feeds: where last replicated offsets come from."""
