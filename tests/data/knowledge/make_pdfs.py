"""Write the PDF documents of the retrieval-QA set (raw PDF syntax, standard Helvetica).

The output is deterministic (no dates, no ids), so running this again gives the same bytes.
Usage: python tests/data/knowledge/make_pdfs.py
"""

from __future__ import annotations

import textwrap
from pathlib import Path

HERE = Path(__file__).parent
PAGE_W, PAGE_H, MARGIN = 595, 842, 56  # A4 in points
LINES_PER_PAGE = 52
WRAP = 92  # characters per line of 10-point Helvetica within the margins

BEEKEEPING = """
# Ashcombe Beekeepers' Association: Beginners' Course Notes

These notes accompany the six-session beginners' course held each spring at the association
apiary behind Ashcombe village hall. They cover the colony and its year, the equipment you
need, how to inspect a hive, and the pests and diseases every beekeeper must learn to
recognise. Read them before the first practical session.

## The colony

A honey bee colony in summer holds one queen, up to fifty thousand female workers and a few
hundred male drones. The queen is the only fertile female: at the peak of the season she lays
up to two thousand eggs a day. A worker lives about six weeks in summer, spending her first
three weeks inside the hive cleaning cells, feeding larvae and building comb before she
becomes a forager. Workers raised in autumn live through the whole winter.

Drones do no work in the hive. Their only role is to mate with young queens from other
colonies, and they are driven out of the hive by the workers at the end of summer, when
food becomes scarce.

## Equipment

Every student needs a full bee suit with a veil, a pair of nitrile gloves, and a hive tool,
the flat steel lever used to prise apart frames stuck together with propolis. The association
lends suits for the course. A smoker is used to calm the bees: burn dry wood shavings or
hessian, never anything treated with chemicals, and puff cool white smoke gently at the
entrance a minute before opening the hive.

Our apiary uses the National hive, which consists of a floor, a brood box where the queen
lays, a queen excluder, one or more honey supers and a roof. Frames hang inside each box
with a gap of eight millimetres between them, the bee space, which the bees leave free as a
walkway instead of filling it with comb.

## Hive inspections

From April to September, inspect each colony once a week in warm, calm weather, ideally in
the middle of a sunny day when many foragers are out. Move slowly and keep the frames over
the open box so that the queen cannot fall onto the grass. For each frame, check for eggs,
which show that the queen was present within the last three days, and note the amount of
brood, pollen and honey.

The main purpose of a spring inspection is to spot the signs of swarming early. Queen cells
hanging from the bottom edge of the frames mean the colony is preparing to swarm. If you find
charged queen cells, with a larva floating in royal jelly, carry out an artificial swarm
that day: move the old queen to a new hive on the original site and leave the queen cells
with the rest of the colony.

Record every inspection on a hive card: the date, the temper of the bees, whether eggs were
seen, the number of brood frames and any treatment given. A colony that becomes aggressive
from one week to the next may have lost its queen.

## Pests and diseases

The varroa mite is the most serious pest of honey bees. It feeds on larvae and adult bees
and spreads viruses, including the deformed wing virus. Every colony at our apiary is
monitored with a sticky board under the open mesh floor: count the mites that fall over seven
days, and treat the colony if the natural drop is more than ten mites a day in summer.
Treatment is applied in late summer after the honey has been taken off, so that no residue
reaches the honey.

American foulbrood and European foulbrood are bacterial diseases of the brood, and both are
notifiable: if you suspect either, you must tell the regional bee inspector, who will visit
free of charge. Signs include a patchy brood pattern, sunken and greasy cappings, and a
sour smell. Never feed bees honey from an unknown source, because it can carry foulbrood
spores.

Wasps attack weak colonies in late summer. Reduce the hive entrance to the width of one or
two bees so that the guards can defend it.

## Honey and winter

Honey is ready to harvest when at least three quarters of the cells in a super are capped
with wax. Clear the bees from the supers with a clearer board the day before, extract the
frames in the association's spinner, and strain the honey through a double sieve before
jarring. Honey should have a water content below twenty per cent, or it will ferment.

Before winter, each colony needs about twenty kilograms of stores. Heft the hive from the
back in October: if it feels light, feed thick sugar syrup made from two parts sugar to one
part water, and in midwinter place a block of fondant over the crown board if stores run low.
Fit a mouse guard to the entrance in October, because mice move into hives for the warmth.
"""

WATER = """
# Tarnside Water Board: Drinking Water Quality Report 2024

This report tells customers of the Tarnside Water Board about the quality of the water we
supplied in 2024. It is published every year as required by the drinking water regulations.
Copies can be requested free of charge at any of our offices.

## Where your water comes from

About seventy per cent of our water comes from Blackmere Reservoir in the hills above
Tarnside, which collects rainfall from moorland. The rest is pumped from three boreholes in
the limestone at Hallow Green, which supply the southern villages. Reservoir water is soft
and slightly peaty; borehole water is hard, with a high calcium content that leaves scale in
kettles.

## How we treat it

At the Blackmere treatment works, water is first screened to remove leaves and debris, then
treated with a coagulant so that fine particles and the natural brown colour clump together
and can be removed. It then passes through rapid sand filters and granular activated carbon,
which removes taste and odour compounds. Finally, it is disinfected with chlorine and its
acidity is adjusted to protect pipes from corrosion. Borehole water is filtered and treated
with ultraviolet light before chlorination.

## Test results in 2024

We took 14,862 samples in 2024 from treatment works, service reservoirs and randomly chosen
customers' taps. Of all the tests, 99.96 per cent met the regulatory standards. Every sample
tested for E. coli at customers' taps was clear.

Six tests failed a standard. Four were for iron in the northern part of the network, where
old cast-iron mains are being replaced; iron can make water look orange but is not a health
risk at the levels found. One failure was for coliform bacteria at a single tap in Marlow
Street; a repeat sample three days later was clear, and the cause was traced to a dirty
kitchen tap. One failure was for the pesticide MCPA in treated water from Blackmere in
October, after heavy rain washed it off farmland; we increased the carbon dose and worked
with local farmers on safer spraying times.

## Lead

There are no lead pipes in our network, but some houses built before 1970 still have lead
pipes between the property boundary and the kitchen tap. Lead is harmful, especially to young
children and pregnant women. We add a small amount of orthophosphate to the water, which forms
a protective layer inside the pipes. If you think your home has lead pipes, run the cold tap
for a minute in the morning before drinking the water, and ask us for a free lead test.

## Hardness

Water from Blackmere has a hardness of around 30 milligrams of calcium carbonate per litre,
which is soft. Water in the southern villages supplied from Hallow Green is around 290
milligrams per litre, which is very hard. Hard water is safe to drink and has no effect on
health, but a water softener can reduce scale; if you fit one, keep a separate unsoftened tap
for drinking.

## Investment and contacts

In 2024 we replaced 41 kilometres of old water mains and completed the new ultraviolet plant
at Hallow Green. Over the next five years we will replace a further 200 kilometres of mains
and build a second covered reservoir at Ridgeway to improve supply during droughts.

If your water looks, smells or tastes unusual, call our customer line, which is open
twenty-four hours a day. Full results for your water supply zone can be found by entering
your postcode on our website.
"""


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _lines(markdown: str) -> list[tuple[str, str]]:
    """(font, text) lines: headings in bold, paragraphs wrapped, a blank line between."""
    out: list[tuple[str, str]] = []
    for block in markdown.strip().split("\n\n"):
        text = " ".join(block.split())
        if text.startswith("#"):
            out += [("F2", text.lstrip("# ")), ("F1", "")]
        else:
            out += [("F1", line) for line in textwrap.wrap(text, WRAP)] + [("F1", "")]
    return out


def _stream(lines: list[tuple[str, str]]) -> bytes:
    ops = [f"BT 14 TL {MARGIN} {PAGE_H - MARGIN} Td"]
    for font, text in lines:
        size = 13 if font == "F2" else 10
        ops.append(f"/{font} {size} Tf ({_escape(text)}) Tj T*")
    ops.append("ET")
    return "\n".join(ops).encode("latin-1")


def pdf(markdown: str) -> bytes:
    """A PDF of ``markdown`` (headings and paragraphs only), paged."""
    lines = _lines(markdown)
    pages = [lines[i : i + LINES_PER_PAGE] for i in range(0, len(lines), LINES_PER_PAGE)]
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, once the page objects are numbered
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
    ]
    kids = []
    for page in pages:
        content = _stream(page)
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> >>" % (PAGE_W, PAGE_H, len(objects))
        )
        kids.append(len(objects))
    refs = " ".join(f"{k} 0 R" for k in kids).encode()
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (refs, len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def main() -> None:
    """Write both PDFs beside this script."""
    documents = {"beekeeping_course.pdf": BEEKEEPING, "water_quality_2024.pdf": WATER}
    for name, text in documents.items():
        (HERE / name).write_bytes(pdf(text))
        print(HERE / name)  # noqa: T201 - a script telling what it wrote


if __name__ == "__main__":
    main()
