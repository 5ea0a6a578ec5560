"""Diagnosis: from what was measured, the model and the sources to ranked findings."""
