"""A host staging buffer is no TPL101 finding: a factory's value only filled in place with values
not known to be on the device and moved whole (analysis/devices.py `staged_on_host`). From real
code: pytorch/examples' batched RPC agent, whose `self.states` gathers the observers' states
with `self.states[ob_id].copy_(state)` and goes to the GPU as `self.states.cuda()`."""

from __future__ import annotations

import textwrap

from torchperf_lint.api import lint_source

AGENT = """
import torch

class Agent:
    def __init__(self, policy, optimizer, n):
        self.policy = policy.cuda()
        self.optimizer = optimizer
        self.states = torch.zeros(n, 4)

    def observe(self, i, state):
        {fill}

    def run_episode(self, rewards):
        loss = self.policy({use}).sum()
        loss.backward()
        self.optimizer.step()
        self.states = torch.zeros(len(self.states), 4)

def main(policy, optimizer, rewards):
    agent = Agent(policy, optimizer, 8)
    for episode in range(100):
        agent.run_episode(rewards.cuda())
"""


def lint(fill: str, use: str = "self.states.cuda()") -> list[int]:
    source = textwrap.dedent(AGENT.format(fill=fill, use=use))
    return [f.line for f in lint_source(source, path="m.py", select=["TPL101"])]


def test_an_attribute_filled_on_the_host_and_moved_whole_is_a_staging_buffer() -> None:
    assert lint("self.states[i].copy_(state)") == []
    assert lint("self.states[i] = state") == []


def test_a_buffer_read_another_way_is_no_staging_buffer() -> None:
    # used where it is, next to device tensors: made on the host for nothing
    assert lint("self.states[i].copy_(state)", use="self.states + rewards") == [17]
    # filled with what the model computed on the device: a copy to the host and back
    assert lint('self.states[i] = torch.randn(4, device="cuda") + i') == [17]


def test_a_buffer_never_filled_is_no_staging_buffer() -> None:
    assert lint("pass") == [17]
