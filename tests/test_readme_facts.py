"""The README's figures about the catalog and the zoo are the registry's, not a memory."""

from __future__ import annotations

import re
from pathlib import Path

from zoo import MUTANTS

from conformance._case import all_cases, iter_areas

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
NUMBERS = {"nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def test_the_readme_counts_the_catalog_and_its_areas() -> None:
    found = re.search(r"has (\d+) cases in (\w+) areas", README)
    assert found, "README: the sentence 'has N cases in M areas' is gone"
    assert int(found[1]) == len(all_cases()), "README: the number of cases"
    assert NUMBERS.get(found[2]) == len(list(iter_areas())), "README: the number of areas"


def test_the_readme_counts_the_zoo() -> None:
    found = re.search(r"A zoo of (\d+) broken clients", README)
    assert found, "README: the sentence 'A zoo of N broken clients' is gone"
    assert int(found[1]) == len(MUTANTS), "README: the number of zoo mutants"
