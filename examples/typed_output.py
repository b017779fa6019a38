"""Typed results: a job's answer as a pydantic model, from the blocking and the async driver.

Usage: python examples/typed_output.py

``output_type=Invoice`` makes the model's JSON Schema the job's output schema: the quality
gate holds the answer to it (an answer that does not fit goes back to the model with its
problems) and ``job.output()``, ``rt.run(...)`` and ``result.output_as(Invoice)`` give an
``Invoice`` back. The jobs here run a direct skill on the deterministic offline model, which
answers a schema the way a model under constrained decoding does (each field from the text
after its name), so everything printed is what the runtime produced; no keys, no network.

The second half does the same from ``asyncio``: ``await rt.asubmit(...)``, ``async for``
over the job's events, ``await job.aoutput()``, and three ``rt.arun(...)`` at once with
``asyncio.gather`` on one event loop.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

import raytroupe


class Invoice(BaseModel):
    """The fields the skill reads from an invoice's text."""

    invoice_number: str = Field(description="As printed, e.g. INV-2024-117.")
    total: float = Field(ge=0, description="The amount due.")
    due_date: dt.date


READER = raytroupe.SkillSpec.model_validate(
    {
        "name": "invoice-reader",
        "version": "1",
        "description": "Reads an invoice's number, total and due date.",
        "execution_mode": "direct",  # one model call, its answer held to the output type
        "prompt": {"instructions": "Extract the invoice's number, total and due date."},
    }
)

INVOICES = [
    "Invoice INV-2024-117 from Acme Tools: total 1,250.00 EUR, due July 15, 2025.",
    "Globex bill, invoice number GX-88. Total 99.50 USD. Due date 2025-08-01.",
    "Initech invoice IN-7 for consulting, total 4,000 USD, due 1 September 2025.",
    "Invoice HX-301 from Hooli: total 12.75 EUR, due Oct 3, 2025.",
]


def blocking(rt: raytroupe.Runtime) -> None:
    """The blocking driver: ``submit`` + ``output``, ``run``, ``output_as``."""
    job = rt.submit(INVOICES[0], skill="invoice-reader", output_type=Invoice)
    invoice = job.output(timeout=60)  # an Invoice
    print(f"job.output():  {invoice!r}")
    print(f"  due in {(invoice.due_date - dt.date(2025, 7, 1)).days} days from July 1")
    result = job.result(timeout=60)
    print(f"  the answer as JSON: {result.answer}")
    print(f"  result.output_as(Invoice) == job.output(): {result.output_as(Invoice) == invoice}")
    print(f"rt.run():      {rt.run(INVOICES[1], skill='invoice-reader', output_type=Invoice)!r}")


async def concurrent(rt: raytroupe.Runtime) -> None:
    """The async driver: nothing here blocks the event loop."""
    job = await rt.asubmit(INVOICES[2], skill="invoice-reader", output_type=Invoice)
    async for event in job.aevents(timeout=60):
        print(f"  [{event.seq}] {event.type}")
    print(f"await job.aoutput(): {await job.aoutput(timeout=60)!r}")
    read = await asyncio.gather(
        *(rt.arun(text, skill="invoice-reader", output_type=Invoice) for text in INVOICES)
    )
    print("asyncio.gather of rt.arun() x 4:")
    for invoice in read:
        print(f"  {invoice.invoice_number:>12}  {invoice.total:>9.2f}  due {invoice.due_date}")


def main() -> None:
    """Register the skill, run the blocking then the async half."""
    with tempfile.TemporaryDirectory(prefix="troupe-typed-") as tmp:
        state = Path(tmp)
        rt = raytroupe.connect(
            address="local",  # a Ray of its own, even if another runs on this machine
            num_cpus=2,
            include_dashboard=False,
            log_level="warning",
            journal=state / "journal.sqlite",
            tools_config=raytroupe.ToolsConfig(
                state_dir=state / "tools", scratch_root=state / "scratch"
            ),
            memory_config=raytroupe.MemoryConfig(path=state / "memory"),
        )
        try:
            rt.put_skill(READER)
            blocking(rt)
            print()
            asyncio.run(concurrent(rt))
        finally:
            rt.shutdown()


if __name__ == "__main__":
    main()
