"""The provenance fields of a results file: the machine from the CPU's own description,
the commit of the checkout the package runs from."""
import os
import pathlib
import subprocess

from transformer_tf.runtime import provenance

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_the_machine_names_the_model_the_cores_and_only_the_flags_that_matter(
        tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n"
                       "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_bf16 sha_ni\n")
    monkeypatch.setenv("TRANSFORMER_TF_CPUINFO", str(cpuinfo))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(os.cpu_count())),
                        raising=False)  # not pinned, whatever runs the suite
    assert provenance.machine_description() == (
        f"Test CPU 9000, {os.cpu_count()} cores; flags: avx2, fma, avx512f, avx512_bf16")
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Old CPU\nflags\t\t: fpu sse2\n")
    assert provenance.machine_description().endswith("flags: none of AVX2/AVX-512")


def test_a_pinned_process_says_on_how_many_cores_it_ran(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: avx2 fma\n")
    monkeypatch.setenv("TRANSFORMER_TF_CPUINFO", str(cpuinfo))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2}, raising=False)
    assert provenance.machine_description() == (
        "Test CPU, 4 cores, this process pinned to 1 (taskset); flags: avx2, fma")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert provenance.machine_description() == "Test CPU, 4 cores; flags: avx2, fma"


def test_the_commit_is_the_checkouts_head_wherever_the_command_runs(tmp_path, monkeypatch):
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.chdir(tmp_path)  # not a git checkout
    assert provenance.current_commit() == head


def test_conditions_say_which_rows_ran_where_and_alongside_what():
    rows = [{"key": "a", "trained_on": "M1"}, {"key": "b", "trained_on": "M1"}]
    # Nothing recorded alongside: only the machines, as before the flag existed.
    assert provenance.conditions_of(rows, "key", "row") == "every row on the machine named"
    same = [dict(r, trained_alongside="the ablation on core 0") for r in rows]
    assert provenance.conditions_of(same, "key", "run") == (
        "every run alongside the ablation on core 0; every run on the machine named")
    mixed = [same[0], dict(rows[1], trained_on="M2"), {"key": "c", "trained_on": "M2",
                                                      "trained_alongside": "a benchmark"}]
    assert provenance.conditions_of(mixed, "key", "row") == (
        "rows alongside: the ablation on core 0 (a); nothing recorded (b); a benchmark (c); "
        "rows on several machines: M1 (a); M2 (b, c)")


def test_where_this_runs_records_the_company_only_when_given(monkeypatch):
    monkeypatch.setattr(provenance, "machine_description", lambda: "M")
    monkeypatch.setattr(provenance, "current_commit", lambda: "abc1234")
    assert provenance.where_this_runs() == {"trained_on": "M", "trained_at_commit": "abc1234"}
    assert provenance.where_this_runs("X on core 1") == {
        "trained_on": "M", "trained_at_commit": "abc1234", "trained_alongside": "X on core 1"}


def test_a_run_trained_over_several_sittings_says_where_each_part_ran(tmp_path):
    here = {"trained_on": "M1", "trained_at_commit": "c3"}
    # No sitting noted: where this process runs.
    assert provenance.where_it_ran(tmp_path, here, 3000) == here
    provenance.record_sitting(tmp_path, {"trained_on": "M1", "trained_at_commit": "c1"}, 0)
    # Killed before its first checkpoint: the next sitting starts at step 0 again.
    provenance.record_sitting(tmp_path, {"trained_on": "M1", "trained_at_commit": "c2",
                                         "trained_alongside": "tests"}, 0)
    provenance.record_sitting(tmp_path, {"trained_on": "M1", "trained_at_commit": "c3"}, 1250)
    # Began where the run was already done (its scores only).
    provenance.record_sitting(tmp_path, {"trained_on": "M2", "trained_at_commit": "c4"}, 3000)
    assert provenance.where_it_ran(tmp_path, here, 3000) == {
        "trained_on": "M1",
        "trained_at_commit": "c2 (steps 0-1,250); c3 (steps 1,250-3,000)",
        "trained_alongside": "tests (steps 0-1,250); not recorded (steps 1,250-3,000)"}


def test_steps_before_the_first_noted_sitting_are_not_recorded(tmp_path):
    provenance.record_sitting(tmp_path, {"trained_on": "M", "trained_at_commit": "c2"}, 1332)
    assert provenance.where_it_ran(tmp_path, {}, 3000) == {
        "trained_on": "not recorded (steps 0-1,332); M (steps 1,332-3,000)",
        "trained_at_commit": "not recorded (steps 0-1,332); c2 (steps 1,332-3,000)"}


def test_a_resume_from_an_older_checkpoint_replaces_the_steps_after_it(tmp_path):
    # c1 trains 0-2,000; c2 resumes at 2,000, its newest checkpoint is damaged; c3 resumes
    # from the older ckpt-1500 and trains to 3,000: the run is c1's up to 1,500, then c3's.
    for commit, step in (("c1", 0), ("c2", 2000), ("c3", 1500)):
        provenance.record_sitting(tmp_path, {"trained_on": "M", "trained_at_commit": commit},
                                  step)
    assert provenance.where_it_ran(tmp_path, {}, 3000) == {
        "trained_on": "M",
        "trained_at_commit": "c1 (steps 0-1,500); c3 (steps 1,500-3,000)"}
