package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.cli.Tables;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.SchedulerStatus;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched list}. */
@Command(name = "list", description = "The node's GPUs: memory, utilization, temperature, power, health, holder.")
public final class ListCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Override
    public Integer call() {
        // a read: no scheduler, no lock, nothing created or written (README: read-only commands write nothing)
        Node.Devices n = root.readDevices();
        if (root.json()) {
            root.out().println(
                    Printable.escapeJson(Json.pretty(SchedulerStatus.devices(n.devices(), n.allocations()))));
            return 0;
        }
        root.out().println("Backend " + Printable.escape(n.backend()) + ", " + n.devices().size() + " GPUs");
        root.out().print(table(n.devices()));
        return 0;
    }

    static String table(List<DeviceState> devices) {
        List<String[]> rows = new ArrayList<>();
        rows.add(new String[]{"IDX", "NAME", "MEMORY USED/TOTAL", "UTIL", "TEMP", "POWER", "HEALTH", "HELD BY"});
        for (DeviceState d : devices) {
            Optional<GpuMetrics> m = d.metrics();
            rows.add(new String[]{String.valueOf(d.index()), d.device().name(),
                m.flatMap(GpuMetrics::memoryUsed).map(x -> x.toHumanString()).orElse("?") + " / "
                        + d.device().memory().toHumanString(),
                m.filter(x -> x.utilizationPercent().isPresent()).map(x -> String.format(Locale.ROOT, "%.0f%%",
                        x.utilizationPercent().getAsDouble())).orElse("-"),
                m.filter(x -> x.temperatureCelsius().isPresent()).map(x -> String.format(Locale.ROOT, "%.0f C",
                        x.temperatureCelsius().getAsDouble())).orElse("-"),
                m.filter(x -> x.powerWatts().isPresent()).map(x -> String.format(Locale.ROOT, "%.0f W",
                        x.powerWatts().getAsDouble())).orElse("-"),
                d.health() + (d.pool() == DeviceState.Pool.IN_POOL ? "" : " " + d.pool()),
                d.exclusiveHolder().orElse(d.isShared() ? "shared x" + d.sharedHolders() : "-")});
        }
        return Tables.format(rows);
    }
}
