"""Tests of mace.config."""
