package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.client.NodeClient;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/**
 * {@code gpusched release}. With {@code --json}: {@code {"ids": [...], "released": N, "alreadyReleased": M}} (the ids
 * asked for, how many this call released, how many were released before it).
 */
@Command(name = "release", description = "Release allocations.")
public final class ReleaseCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Parameters(paramLabel = "ID", arity = "1..*", description = "allocation id; several are released together"
            + " (one ledger write, none when one of them was never issued)")
    List<String> ids;

    @Override
    public Integer call() {
        try (NodeClient n = root.client()) {
            int released = ids.size() == 1 ? (n.release(ids.get(0)) ? 1 : 0) : n.releaseAll(ids);
            if (root.json()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("ids", ids);
                m.put("released", released);
                m.put("alreadyReleased", ids.size() - released);
                root.out().println(Printable.escapeJson(Json.pretty(m)));
            } else if (ids.size() == 1) {
                root.out().println(released == 1 ? "released " + Printable.escape(ids.get(0))
                        : Printable.escape(ids.get(0)) + " was already released");
            } else {
                root.out().println("released " + released + " of " + ids.size() + ": "
                        + Printable.escape(String.join(" ", ids))
                        + (released < ids.size() ? " (the others were already released)" : ""));
            }
        }
        return 0;
    }
}
