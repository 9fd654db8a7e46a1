"""Selecting cases: ``streamcheck::SC-AREA-N`` by exact id, the level, area and transport
markers ``-m`` and ``-k`` read, and what a host project sees without --streamcheck."""

from __future__ import annotations

import pytest
from plugin_targets._pytester import CATALOG, PLAIN, prepare

from conformance._case import all_cases


@pytest.fixture(autouse=True)
def _isolated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare(pytester, monkeypatch)


def _ids(pytester: pytest.Pytester, *args: str) -> list[str]:
    """The case ids a ``--collect-only`` run against the reference client selects."""
    result = pytester.runpytest(*PLAIN, "--streamcheck=reference", "--co", "-q", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    return [line.split("::")[1] for line in result.outlines if line.startswith("streamcheck::")]


def _where(**fields: str) -> list[str]:
    """The catalog's ids whose case has these fields (area, transport, level)."""
    return [c.id for c in all_cases() if all(c.to_json()[k] == v for k, v in fields.items())]


# -- exact selection by id ---------------------------------------------------------------


def test_a_node_id_selects_exactly_that_case(pytester: pytest.Pytester) -> None:
    """``streamcheck::SC-RETRY-1`` runs that case alone, not SC-RETRY-10 to 19 as
    ``-k SC-RETRY-1`` would; "collected" counts one item, as for a test function's id."""
    result = pytester.runpytest(*PLAIN, "--streamcheck=reference", "streamcheck::SC-RETRY-1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["collected 1 item", f"streamcheck: 1 of {len(CATALOG)} cases selected*"]
    )
    assert _ids(pytester, "-k", "SC-RETRY-1") == [f"SC-RETRY-{n}" for n in [1, *range(10, 20)]]


def test_several_ids_and_the_whole_suite(pytester: pytest.Pytester) -> None:
    """Ids may be repeated on the command line; bare ``streamcheck`` is every case."""
    ids = _ids(pytester, "streamcheck::SC-COMMIT-5", "streamcheck::SC-RETRY-3")
    assert ids == ["SC-RETRY-3", "SC-COMMIT-5"]  # in catalog order
    assert _ids(pytester, "streamcheck") == list(CATALOG)


def test_ids_combine_with_k_and_m(pytester: pytest.Pytester) -> None:
    """-k and -m then deselect among the cases named."""
    named = ["streamcheck::SC-RETRY-1", "streamcheck::SC-RETRY-2", "streamcheck::SC-RETRY-37"]
    assert _ids(pytester, *named, "-m", "post") == ["SC-RETRY-2"]
    assert _ids(pytester, *named, "-m", "should") == ["SC-RETRY-37"]
    assert _ids(pytester, *named, "-k", "not SC-RETRY-2") == ["SC-RETRY-1", "SC-RETRY-37"]


def test_an_id_not_in_the_catalog_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """A mistyped id is exit 4 naming it and the closest id, like a missing path."""
    result = pytester.runpytest(*PLAIN, "--streamcheck=reference", "streamcheck::SC-RETRI-3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*streamcheck::SC-RETRI-3: no such case in the catalog; "
            "did you mean streamcheck::SC-RETRY-3?"
        ]
    )


def test_named_user_tests_run_next_to_named_cases(pytester: pytest.Pytester) -> None:
    """A case id and a path of the user's together collect both, and nothing else."""
    pytester.makepyfile(test_user="def test_mine():\n    pass\n")
    result = pytester.runpytest(
        *PLAIN, "--streamcheck=reference", "streamcheck::SC-RETRY-1", "test_user.py"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["collected 2 items"])


# -- markers for -m and -k ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "fields"),
    [
        ("must", {"level": "MUST"}),
        ("should", {"level": "SHOULD"}),
        ("get", {"transport": "get"}),
        ("post", {"transport": "post"}),
        ("retry and post", {"area": "RETRY", "transport": "post"}),
        ("breaker and get", {"area": "BREAKER", "transport": "get"}),
        ("post_area", {"area": "POST"}),
        ("commit and not get", {"area": "COMMIT", "transport": "post"}),
    ],
)
def test_m_selects_by_level_area_and_transport(
    pytester: pytest.Pytester, expression: str, fields: dict[str, str]
) -> None:
    """Level (must, should), transport (get, post) and area markers (retry, commit, ...;
    post_area for the POST area, as post is the transport) combine in -m expressions."""
    assert _ids(pytester, "-m", expression) == _where(**fields)


def test_m_reads_the_streamcheck_marker_keywords(pytester: pytest.Pytester) -> None:
    """``streamcheck(area=..., level=..., transport=..., id=...)`` carries every field."""
    assert _ids(pytester, "-m", "streamcheck(area='POST')") == _where(area="POST")
    assert _ids(pytester, "-m", "streamcheck(level='SHOULD', transport='get')") == _where(
        level="SHOULD", transport="get"
    )


@pytest.mark.parametrize(("word", "level"), [("MUST", "MUST"), ("should", "SHOULD")])
def test_k_matches_the_level(pytester: pytest.Pytester, word: str, level: str) -> None:
    """-k matches marker names, case-insensitively: ``-k MUST``, ``-k should``."""
    assert _ids(pytester, "-k", word) == _where(level=level)


def test_strict_markers_accept_every_case_marker(pytester: pytest.Pytester) -> None:
    """Under --strict-markers the suite's markers are registered, and listed by --markers."""
    result = pytester.runpytest(
        *PLAIN, "--streamcheck=reference", "--strict-markers", "streamcheck::SC-RETRY-2"
    )
    result.assert_outcomes(passed=1)
    markers = pytester.runpytest(*PLAIN, "--streamcheck=reference", "--markers")
    markers.stdout.fnmatch_lines(
        [
            "@pytest.mark.must: a MUST conformance case of streamcheck",
            "@pytest.mark.post: a streamcheck case on the POST transport",
            "@pytest.mark.retry: a streamcheck case of the RETRY area (SC-RETRY-N)",
            "@pytest.mark.post_area: a streamcheck case of the POST area (SC-POST-N)",
        ]
    )


def test_a_host_run_without_streamcheck_is_untouched(pytester: pytest.Pytester) -> None:
    """Without --streamcheck: no case markers are registered (a host's own ``must``
    marker is its own business), and ``streamcheck::...`` is just a missing path."""
    pytester.makepyfile(test_user="def test_mine():\n    pass\n")
    markers = pytester.runpytest(*PLAIN, "--markers")
    assert "@pytest.mark.must" not in markers.stdout.str()
    plain = pytester.runpytest(*PLAIN, "--strict-markers", "-v")
    plain.assert_outcomes(passed=1)
    assert "cases selected" not in plain.stdout.str()
    missing = pytester.runpytest(*PLAIN, "streamcheck::SC-RETRY-1")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR


# -- progress ----------------------------------------------------------------------------


def test_progress_names_the_count_and_with_v_each_running_case(pytester: pytest.Pytester) -> None:
    """The collection line says how many cases run; with -v pytest writes each case's
    node id when it starts and its outcome with the run's percentage when it ends."""
    ids = ("streamcheck::SC-RETRY-1", "streamcheck::SC-RETRY-3")
    quiet = pytester.runpytest(*PLAIN, "--streamcheck=reference", *ids)
    quiet.stdout.fnmatch_lines([f"streamcheck: 2 of {len(CATALOG)} cases selected; -v names *"])
    verbose = pytester.runpytest(*PLAIN, "--streamcheck=reference", *ids, "-v")
    verbose.stdout.fnmatch_lines(
        [
            f"streamcheck: 2 of {len(CATALOG)} cases selected",
            "streamcheck::SC-RETRY-1 PASSED * [[] 50%[]]",
            "streamcheck::SC-RETRY-3 PASSED * [[]100%[]]",
        ]
    )
