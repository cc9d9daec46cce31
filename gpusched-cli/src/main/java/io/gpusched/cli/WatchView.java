package io.gpusched.cli;

import io.gpusched.core.DeviceView;
import io.gpusched.core.MemorySize;
import io.gpusched.core.internal.Printable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * Renders one frame of {@code gpusched watch}: a line per GPU with a utilization bar, memory, temperature, power,
 * health and holder. Health changes since the previous frame are highlighted (reverse video). Plain ANSI: the frame is
 * drawn from the top-left corner and each line cleared to its end, so the terminal does not scroll. The title and every
 * cell are escaped ({@link Printable#escape}): the only escape sequences in a frame are the view's own.
 */
public final class WatchView {
    /** Move to the top-left and clear from there to the end of the screen. */
    public static final String HOME_AND_CLEAR = "\u001b[H\u001b[J";
    private static final String REVERSE = "\u001b[7m";
    private static final String RESET = "\u001b[0m";
    private static final int BAR = 20;

    private WatchView() {
    }

    /**
     * @param title    first line
     * @param devices  current device states
     * @param previous health of each device index in the previous frame (empty on the first)
     * @param ansi     whether to use escape codes (false for pipes and tests)
     * @return the frame
     */
    public static String render(String title, List<DeviceView> devices, Map<Integer, String> previous, boolean ansi) {
        StringBuilder sb = new StringBuilder();
        if (ansi) {
            sb.append(HOME_AND_CLEAR);
        }
        sb.append(Printable.escape(title)).append('\n');
        List<String[]> rows = new ArrayList<>();
        rows.add(new String[]{"GPU", "UTIL", "", "MEMORY", "TEMP", "POWER", "HEALTH", "HELD BY"});
        List<Boolean> changed = new ArrayList<>();
        changed.add(false);
        for (DeviceView d : devices) {
            double util = d.utilizationPercent() != null ? d.utilizationPercent() : -1;
            int filled = util < 0 ? 0 : (int) Math.round(Math.min(100, util) / 100 * BAR);
            String bar = "[" + "#".repeat(filled) + ".".repeat(BAR - filled) + "]";
            String mem = Optional.ofNullable(d.memoryUsedBytes()).map(x -> MemorySize.ofBytes(x).toHumanString())
                    .orElse("?") + " / "
                    + MemorySize.ofBytes(Optional.ofNullable(d.memoryTotalBytes()).orElse(0L))
                            .toHumanString();
            String temp = d.temperatureCelsius() != null
                    ? String.format(Locale.ROOT, "%.0f C", d.temperatureCelsius()) : "-";
            String power = d.powerWatts() != null ? String.format(Locale.ROOT, "%.0f W", d.powerWatts()) : "-";
            String health = health(d);
            String holder = d.exclusiveHolder().orElse(d.sharedHolders() > 0 ? "shared x" + d.sharedHolders() : "-");
            rows.add(new String[]{String.valueOf(d.index()), util < 0 ? "-" : String.format(Locale.ROOT, "%3.0f%%",
                    util),
                bar, mem, temp, power, health, holder});
            String before = previous.get(d.index());
            changed.add(before != null && !before.equals(health));
        }
        String[] lines = Tables.format(rows).split("\n");
        for (int i = 0; i < lines.length; i++) {
            boolean hi = ansi && changed.get(i);
            sb.append(hi ? REVERSE : "").append(lines[i]).append(hi ? RESET : "").append(ansi ? "\u001b[K" : "")
                    .append('\n');
        }
        return sb.toString();
    }

    /** @return a device's health as a frame shows it (with its pool when draining or quarantined) */
    public static String health(DeviceView d) {
        return d.healthText() + (d.inPool() ? "" : " " + d.pool());
    }
}
