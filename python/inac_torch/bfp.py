"""The block floating point rule of inac_allreduce_f32, in PyTorch, bit for bit.

A reference (for tests and for checking a run) and a DDP communication hook that applies the
same rule but sums the int32 lanes with the process group's own all-reduce (Gloo): training with
`gloo_hook` gives the same weights, bit for bit, as training over INAC.

Per all-reduce of float32 buffers x_1..x_n (one per member):
  e_i = the binary exponent of max|x_i| (maxabs = m * 2^e, m in [0.5, 1)); NaN ignored;
        maxabs == 0 or e < -30: -30; e > 31: 31
  E   = max_i e_i
  s   = clamp(30 - E - ceil(log2 n), 0, 62)
  lane = round-half-to-even(float32(x) * float32(2^s)), clamped to int32 (NaN -> 0); clamped
        or NaN lanes are counted as saturated
  sum = the int32 lanes summed modulo 2^32
  result = float32(float32(sum) * float32(2^-s))
"""

import math

import torch

MIN_EXPONENT = -30
MAX_EXPONENT = 31
MAX_SCALE_BITS = 62
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


def exponent(tensor):
    """e of one member's buffer (see the module's docstring)."""
    a = tensor.detach().reshape(-1).to(torch.float32).abs()
    a = torch.where(torch.isnan(a), torch.zeros_like(a), a)
    maxabs = float(a.max()) if a.numel() else 0.0
    if maxabs == 0.0:
        return MIN_EXPONENT
    if math.isinf(maxabs):
        return MAX_EXPONENT
    _, e = math.frexp(maxabs)
    return max(MIN_EXPONENT, min(MAX_EXPONENT, e))


def ceil_log2(n):
    if n < 1:
        raise ValueError(f"members must be >= 1, got {n}")
    return (n - 1).bit_length()


def scale_bits(max_exponent, members):
    """s for the members' largest exponent E and the job's member count n."""
    return max(0, min(MAX_SCALE_BITS, 30 - max_exponent - ceil_log2(members)))


def quantize(tensor, s):
    """(int32 lanes, saturated count) of a float32 tensor at scale s."""
    v = tensor.detach().reshape(-1).to(torch.float32) * torch.tensor(2.0**s, dtype=torch.float32)
    v = torch.round(v).to(torch.float64)  # half to even, in float32; then exact in float64
    nan = torch.isnan(v)
    saturated = nan | (v < _INT32_MIN) | (v > _INT32_MAX)
    v = torch.where(nan, torch.zeros_like(v), v)
    lanes = v.clamp(_INT32_MIN, _INT32_MAX).to(torch.int32)
    return lanes, int(saturated.sum())


def wrap_sum(lanes_list):
    """The int32 lanes summed modulo 2^32 (two's complement)."""
    total = torch.zeros_like(lanes_list[0], dtype=torch.int64)
    for lanes in lanes_list:
        total += lanes.to(torch.int64)
    total = torch.remainder(total + 2**31, 2**32) - 2**31
    return total.to(torch.int32)


def dequantize(sums, s):
    """float32(float32(sum) * float32(2^-s))."""
    return sums.to(torch.float32) * torch.tensor(2.0**-s, dtype=torch.float32)


def allreduce(tensors, members=None):
    """What inac_allreduce_f32 gives every member for these members' buffers: (result, s,
    saturated counts per member). `members`: the job's member count (default len(tensors))."""
    n = members if members is not None else len(tensors)
    s = scale_bits(max(exponent(t) for t in tensors), n)
    quantized = [quantize(t, s) for t in tensors]
    result = dequantize(wrap_sum([q[0] for q in quantized]), s).reshape(tensors[0].shape)
    return result, s, [q[1] for q in quantized]


def gloo_allreduce_(tensor, process_group=None):
    """The rule over a torch.distributed process group (every rank a member): the exponent
    agreed by a MAX all-reduce, the int32 lanes summed by a SUM all-reduce. In place; returns
    (s, saturated on this rank)."""
    import torch.distributed as dist

    e = torch.tensor([exponent(tensor)], dtype=torch.int32)
    dist.all_reduce(e, op=dist.ReduceOp.MAX, group=process_group)
    s = scale_bits(int(e[0]), dist.get_world_size(process_group))
    lanes, saturated = quantize(tensor, s)
    dist.all_reduce(lanes, group=process_group)
    tensor.copy_(dequantize(lanes, s).reshape(tensor.shape))
    return s, saturated


def gloo_hook(process_group, bucket):
    """A DDP communication hook (register_comm_hook(process_group, gloo_hook)) that all-reduces
    each bucket by the block floating point rule over the process group and divides by the
    world size, exactly as inac_torch.comm_hook does on its INAC path."""
    import torch.distributed as dist

    tensor = bucket.buffer()
    gloo_allreduce_(tensor, process_group)
    tensor.div_(dist.get_world_size(process_group))
    future = torch.futures.Future()
    future.set_result(tensor)
    return future
