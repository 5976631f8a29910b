"""Spatial sharing of a chip: several training jobs at once on disjoint core groups
(``docs/chip.md``, "Partitions"; ``caterpillar share``)."""
