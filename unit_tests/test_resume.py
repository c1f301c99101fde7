"""Choosing where a sync resumes from, given the state and the table's committed checkpoints."""

from source_framework.runtime.resume import AS_GIVEN, EDITED, TABLE_AHEAD, choose_resume_point


def record(seq, state, start, boundary=None):
    return {"seq": seq, "state": state, "start_state": start, "boundary": boundary}


HISTORY = [  # newest first: run 2 started from {"t": 2} and committed t=3, t=4; run 1 from {}
    record(4, {"t": 4}, {"t": 2}, {"": {"cursor": 4, "keys": [[40]]}}),
    record(3, {"t": 3}, {"t": 2}),
    record(2, {"t": 2}, {}),
    record(1, {"t": 1}, {}),
]


def test_an_empty_table_takes_the_state_as_given():
    point = choose_resume_point({"t": 9}, [])
    assert (point.state, point.reason, point.boundary) == ({"t": 9}, AS_GIVEN, None)


def test_the_newest_commits_state_goes_on_with_its_boundary():
    point = choose_resume_point({"t": 4}, HISTORY)
    assert point.reason == AS_GIVEN and point.boundary == {"": {"cursor": 4, "keys": [[40]]}}


def test_an_older_committed_state_resumes_from_the_table():
    for older in ({"t": 3}, {"t": 2}, {"t": 1}):
        point = choose_resume_point(older, HISTORY)
        assert (point.state, point.reason, point.seq) == ({"t": 4}, TABLE_AHEAD, 4)
        assert point.boundary == {"": {"cursor": 4, "keys": [[40]]}}


def test_a_run_whose_first_state_was_never_saved_resumes_from_the_table():
    # run 1 started from nothing; its STATE lines were lost; the user runs again with no state
    point = choose_resume_point({}, HISTORY)
    assert point.reason == TABLE_AHEAD and point.state == {"t": 4}


def test_an_edited_state_is_honoured():
    point = choose_resume_point({"t": 0.5}, HISTORY)
    assert (point.state, point.reason, point.boundary) == ({"t": 0.5}, EDITED, None)


def test_a_state_merged_into_the_newest_commit_resumes_from_it():
    merged = [{"seq": 5, "state": {"t": 7}, "start_state": {"t": 4}, "merged_states": [{"t": 5}, {"t": 6}]}] + HISTORY
    point = choose_resume_point({"t": 6}, merged)
    assert (point.state, point.reason) == ({"t": 7}, TABLE_AHEAD)
