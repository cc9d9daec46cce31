package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Tables;
import io.gpusched.client.NodeClient;
import io.gpusched.client.QueueEntry;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched queue}: the requests waiting for GPUs in the node service's fair queue. */
@Command(name = "queue", description = "The requests waiting for GPUs (allocate --wait, run --wait), served fairly"
        + " across users.")
public final class QueueCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Override
    public Integer call() {
        try (NodeClient n = root.client()) {
            List<QueueEntry> queue = n.queue();
            if (root.json()) {
                List<Map<String, Object>> out = new ArrayList<>();
                for (QueueEntry q : queue) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("position", q.position());
                    m.put("user", q.user());
                    m.put("uid", q.uid());
                    m.put("request", q.request());
                    m.put("since", q.since());
                    out.add(m);
                }
                root.out().println(Printable.escapeJson(Json.pretty(out)));
                return 0;
            }
            if (queue.isEmpty()) {
                root.out().println("no request waits for GPUs");
                return 0;
            }
            List<String[]> rows = new ArrayList<>();
            rows.add(new String[]{"POS", "USER", "SINCE", "REQUEST"});
            for (QueueEntry q : queue) {
                rows.add(new String[]{String.valueOf(q.position()), q.user(), q.since(), q.request()});
            }
            root.out().print(Tables.format(rows));
        }
        return 0;
    }
}
