"""Picture widgets redraw cheaply: a same-sized update repaints without a layout pass of the
screen (the live probe updates every second during training), a resized one lays out again."""

import pytest
from textual.app import App, ComposeResult

from minitx.tui.app.widgets.attention import AttentionGrid


class GridApp(App):
    def compose(self) -> ComposeResult:
        yield AttentionGrid()


@pytest.mark.asyncio
async def test_a_same_sized_grid_update_repaints_without_layout_and_a_taller_one_relayouts():
    app = GridApp()
    async with app.run_test(size=(60, 20)) as pilot:
        grid = app.query_one(AttentionGrid)
        grid.numbers = True
        grid.show([[0.1, 0.9], [0.8, 0.2]], ["a", "b"], ["x", "y"])
        await pilot.pause()
        height = grid.size.height
        layouts = []
        refresh = grid.refresh

        def recording_refresh(*args, layout=False, **kwargs):
            layouts.append(layout)
            return refresh(*args, layout=layout, **kwargs)

        grid.refresh = recording_refresh
        grid.show([[0.3, 0.7], [0.6, 0.4]], ["a", "b"], ["x", "y"])
        await pilot.pause()
        assert layouts[0] is False
        assert ".30" in grid.render().plain and grid.size.height == height

        grid.show([[0.3, 0.7], [0.6, 0.4], [0.5, 0.5]], ["a", "b"], ["x", "y", "z"])
        await pilot.pause()
        assert layouts[-1] is True
        assert grid.size.height == height + 1
