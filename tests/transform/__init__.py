"""Tests of mace.transform."""
