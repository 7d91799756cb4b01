"""model.token_loader: windows over token shards, sampling without replacement, DDP shards, a resumable cursor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.token_loader import (
    Cursor,
    DataError,
    TokenLoader,
    TokenWindows,
    WindowSampler,
    eval_indices,
    read_meta,
    split_paths,
    tokenizer_dir,
)
from model.token_shards import shard_name, write_token_shard


@pytest.fixture
def shards(tmp_path):
    """Two train shards (1,000 and 517 tokens, values = position mod 60000) and a val shard."""
    a = np.arange(1000) % 60000
    b = np.arange(1000, 1517)
    paths = [tmp_path / shard_name("c4", "train", 0), tmp_path / shard_name("c4", "train", 1)]
    write_token_shard(paths[0], a)
    write_token_shard(paths[1], b)
    write_token_shard(tmp_path / shard_name("c4", "val", 0), np.arange(300))
    return tmp_path, [a, b]


def test_windows_cover_each_shard_without_crossing_it(shards):
    folder, arrays = shards
    windows = TokenWindows(split_paths(folder, "train"), block_size=16)
    # (n - 1) // T windows per shard: 999 // 16 = 62 and 516 // 16 = 32
    assert len(windows) == 62 + 32
    assert windows.tokens == 1517
    np.testing.assert_array_equal(windows.window(0), arrays[0][:17])
    np.testing.assert_array_equal(windows.window(61), arrays[0][61 * 16:62 * 16 + 1])
    np.testing.assert_array_equal(windows.window(62), arrays[1][:17])  # the second shard starts afresh
    np.testing.assert_array_equal(windows.window(93), arrays[1][31 * 16:32 * 16 + 1])
    with pytest.raises(IndexError):
        windows.window(94)
    x, y = windows.batch([0, 62])
    assert x.dtype == torch.int64 and x.shape == (2, 16) and x.is_contiguous() and y.is_contiguous()
    assert torch.equal(y[:, :-1], x[:, 1:])  # targets are the inputs shifted by one
    assert x[1, 0].item() == 1000 and y[1, -1].item() == 1016


def test_an_epoch_visits_every_window_once_in_a_seeded_order():
    sampler = WindowSampler(n_windows=40, micro_batch=4, seed=7)
    first = np.concatenate([sampler.next_indices() for _ in range(10)])
    assert sorted(first.tolist()) == list(range(40))
    assert sampler.cursor.epoch == 0 and sampler.cursor.position == 40
    second = np.concatenate([sampler.next_indices() for _ in range(10)])
    assert sorted(second.tolist()) == list(range(40)) and sampler.cursor.epoch == 1
    assert not np.array_equal(first, second)  # a new permutation each epoch
    again = WindowSampler(n_windows=40, micro_batch=4, seed=7)
    assert np.array_equal(np.concatenate([again.next_indices() for _ in range(10)]), first)
    other = WindowSampler(n_windows=40, micro_batch=4, seed=8)
    assert not np.array_equal(np.concatenate([other.next_indices() for _ in range(10)]), first)


def test_the_tail_that_does_not_fill_a_micro_batch_is_skipped():
    sampler = WindowSampler(n_windows=10, micro_batch=4, seed=0)
    got = [sampler.next_indices() for _ in range(3)]
    assert [len(g) for g in got] == [4, 4, 4]
    assert len(set(np.concatenate(got[:2]).tolist())) == 8  # epoch 0: 8 of 10 windows, no repeat
    assert sampler.cursor.epoch == 1 and sampler.cursor.position == 4


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_split_each_step_without_overlap(world):
    single = WindowSampler(n_windows=120, micro_batch=2 * world, seed=3)
    ranks = [WindowSampler(n_windows=120, micro_batch=2, seed=3, rank=r, world_size=world) for r in range(world)]
    for _ in range(25):  # across an epoch boundary (120 / (2 * world) steps per epoch)
        expected = single.next_indices()
        parts = [r.next_indices() for r in ranks]
        joined = np.concatenate(parts)
        assert len(set(joined.tolist())) == len(joined)  # no window read by two ranks
        assert sorted(joined.tolist()) == sorted(expected.tolist())  # together: one process's batch
    assert all(r.cursor == single.cursor for r in ranks)


def test_a_restored_cursor_continues_exactly(shards):
    folder, _ = shards
    windows = TokenWindows(split_paths(folder, "train"), block_size=16)
    a = TokenLoader(windows, micro_batch=5, seed=11)
    for _ in range(30):  # past the first epoch (94 windows, 18 micro-batches)
        a.next_batch()
    state = a.state_dict()
    expected = [a.next_batch() for _ in range(12)]
    b = TokenLoader(windows, micro_batch=5, seed=11)
    b.load_state_dict(state)
    for (ex, ey), (gx, gy) in zip(expected, (b.next_batch() for _ in range(12)), strict=True):
        assert torch.equal(ex, gx) and torch.equal(ey, gy)


def test_a_cursor_from_other_data_or_settings_is_refused():
    state = WindowSampler(n_windows=100, micro_batch=4, seed=1).state_dict()
    with pytest.raises(DataError, match="windows is 100 but this run's is 90"):
        WindowSampler(n_windows=90, micro_batch=4, seed=1).load_state_dict(state)
    with pytest.raises(DataError, match="step_size"):
        WindowSampler(n_windows=100, micro_batch=2, seed=1, rank=0, world_size=1).load_state_dict(state)



def test_a_crafted_cursor_is_refused_in_one_line_and_nothing_of_it_is_put_back():
    sampler = WindowSampler(n_windows=100, micro_batch=4, seed=1)
    for _ in range(3):
        sampler.next_indices()
    state = sampler.state_dict()
    assert state == {"epoch": 0, "position": 12, "seed": 1, "windows": 100, "step_size": 4}
    for changes, message in (({"position": "12"}, "'position' is '12', not a whole number"),
                             ({"epoch": "0"}, "'epoch' is '0', not a whole number"),
                             ({"position": 12.0}, "'position' is 12.0, not a whole number"),
                             ({"position": True}, "'position' is True, not a whole number"),
                             ({"seed": None}, "'seed' is None, not a whole number"),
                             ({"position": -4}, "epoch 0, position -4 is not a place in the epochs of 100 windows read 4 at a time"),
                             ({"position": 13}, "epoch 0, position 13 is not a place"),
                             ({"position": 104}, "epoch 0, position 104 is not a place"),
                             ({"epoch": -1}, "epoch -1, position 12 is not a place"),
                             ({"step_size": 0}, "'windows' is 100 and 'step_size' 0: not one micro-batch"),
                             ({"windows": [100]}, "'windows' is \\[100\\], not a whole number")):
        fresh = WindowSampler(n_windows=100, micro_batch=4, seed=1)
        with pytest.raises(DataError, match=r"^cannot resume the data cursor: " + message):
            fresh.load_state_dict(dict(state, **changes))
        assert fresh.cursor == Cursor()  # nothing of it was put back
    with pytest.raises(DataError, match="cannot resume the data cursor: it has no 'windows'"):
        WindowSampler(n_windows=100, micro_batch=4, seed=1).load_state_dict({k: v for k, v in state.items() if k != "windows"})
    with pytest.raises(DataError, match="cannot resume the data cursor: a list, not a dict"):
        WindowSampler(n_windows=100, micro_batch=4, seed=1).load_state_dict([0, 12])
    fresh = WindowSampler(n_windows=100, micro_batch=4, seed=1)
    fresh.load_state_dict(state)  # the cursor as it was written goes on where the sampler was
    assert np.array_equal(fresh.next_indices(), sampler.next_indices())


def test_too_little_data_and_out_of_vocabulary_ids_are_clear_errors(tmp_path):
    write_token_shard(tmp_path / "x_train_000000.bin", [5, 6, 7, 9000])
    windows = TokenWindows([str(tmp_path / "x_train_000000.bin")], block_size=3)
    assert len(windows) == 1
    with pytest.raises(DataError, match="fewer than one micro-batch"):
        TokenLoader(windows, micro_batch=2, seed=0)
    with pytest.raises(DataError, match="token id 9000 .* vocab_size 512"):
        TokenLoader(windows, micro_batch=1, seed=0, vocab_size=512).next_batch()


def test_split_paths_reads_tokenize_folders_nanogpt_folders_and_globs(shards, tmp_path_factory):
    folder, _ = shards
    assert [p.rsplit("/", 1)[1] for p in split_paths(folder, "train")] == ["c4_train_000000.bin", "c4_train_000001.bin"]
    assert len(split_paths(str(folder / "*val*.bin"), "val")) == 1
    flat = tmp_path_factory.mktemp("nanogpt")
    np.arange(50, dtype="<u2").tofile(flat / "train.bin")
    paths = split_paths(flat, "train")
    assert paths == [str(flat / "train.bin")]
    assert len(TokenWindows(paths, block_size=7)) == 7  # 49 // 7, read headerless
    with pytest.raises(DataError, match="no val token shards"):
        split_paths(flat, "val")
    with pytest.raises(DataError, match="no token files match"):
        split_paths(str(flat / "*.nothing"), "train")


def test_meta_and_tokenizer_folder(tmp_path):
    assert read_meta(tmp_path) is None and tokenizer_dir(tmp_path) is None
    (tmp_path / "meta.json").write_text('{"vocab_size": 300, "eot_id": 299}')
    (tmp_path / "tokenizer").mkdir()
    assert read_meta(tmp_path)["vocab_size"] == 300
    assert tokenizer_dir(tmp_path) == str(tmp_path / "tokenizer")
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        read_meta(tmp_path)


def test_validation_windows_are_fixed_spread_and_split_across_ranks():
    chosen = eval_indices(1000, 10)
    assert chosen[0] == 0 and chosen[-1] == 999 and len(chosen) == 10
    assert np.array_equal(chosen, eval_indices(1000, 10))
    parts = [eval_indices(1000, 10, rank=r, world_size=3) for r in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == chosen.tolist()
    assert eval_indices(4, 100).tolist() == [0, 1, 2, 3]
    assert len(eval_indices(0, 10)) == 0
