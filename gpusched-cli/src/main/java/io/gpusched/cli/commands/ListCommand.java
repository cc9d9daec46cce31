package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.JsonViews;
import io.gpusched.cli.LocalNodeClient;
import io.gpusched.cli.Node;
import io.gpusched.cli.Tables;
import io.gpusched.client.NodeClient;
import io.gpusched.core.DeviceView;
import io.gpusched.core.MemorySize;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.time.Instant;
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
        List<DeviceView> devices;
        String backend;
        try (NodeClient n = root.client()) {
            if (n instanceof LocalNodeClient) {
                // a local ledger is only read: no scheduler, no lock, nothing created or written (README: read-only
                // commands write nothing)
                Node.Devices d = root.readDevices();
                devices = DeviceView.of(d.devices(), d.allocations(), Instant.now());
                backend = d.backend();
            } else {
                devices = n.devices();
                backend = n.node().backend();
            }
        }
        if (root.json()) {
            root.out().println(Printable.escapeJson(Json.pretty(JsonViews.devices(devices))));
            return 0;
        }
        root.out().println("Backend " + Printable.escape(backend) + ", " + devices.size() + " GPUs");
        root.out().print(table(devices));
        return 0;
    }

    static String table(List<DeviceView> devices) {
        List<String[]> rows = new ArrayList<>();
        rows.add(new String[]{"IDX", "NAME", "MEMORY USED/TOTAL", "UTIL", "TEMP", "POWER", "HEALTH", "HELD BY"});
        for (DeviceView d : devices) {
            rows.add(new String[]{String.valueOf(d.index()), d.name(),
                Optional.ofNullable(d.memoryUsedBytes()).map(x -> MemorySize.ofBytes(x).toHumanString()).orElse("?")
                        + " / " + MemorySize.ofBytes(Optional.ofNullable(d.memoryTotalBytes()).orElse(0L))
                                .toHumanString(),
                Optional.ofNullable(d.utilizationPercent()).map(x -> String.format(Locale.ROOT, "%.0f%%", x))
                        .orElse("-"),
                Optional.ofNullable(d.temperatureCelsius()).map(x -> String.format(Locale.ROOT, "%.0f C", x))
                        .orElse("-"),
                Optional.ofNullable(d.powerWatts()).map(x -> String.format(Locale.ROOT, "%.0f W", x)).orElse("-"),
                d.healthText() + (d.inPool() ? "" : " " + d.pool()),
                d.exclusiveHolder().orElse(d.sharedHolders() > 0 ? "shared x" + d.sharedHolders() : "-")});
        }
        return Tables.format(rows);
    }
}
