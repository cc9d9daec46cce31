package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.ReportTimes;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import java.io.IOException;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * The node's GPU usage under {@code /api/v1}, the same data as {@code gpusched report}: {@code usage}
 * ({@code ?since=7d&until=&by=owner|allocation|device|day}, or {@code ?allocation=ID} for one allocation per GPU) and
 * {@code usage/idle} (allocations idle now, with the idle policy's last step). Read from the accounting store without a
 * lock. GET and HEAD only.
 */
final class UsageHandler implements HttpHandler {
    static final String USAGE = ConsoleServer.API + "/usage";
    static final String IDLE = ConsoleServer.API + "/usage/idle";

    private final AccountingStore store;
    private final Clock clock;

    UsageHandler(AccountingStore store, Clock clock) {
        this.store = store;
        this.clock = clock;
    }

    /** @return the paths served */
    static List<String> paths() {
        return List.of(USAGE, IDLE);
    }

    @Override
    public void handle(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getRawPath();
        Exchanges.get(ex, () -> {
            if (IDLE.equals(path)) {
                Exchanges.json(ex, 200, idle());
                return;
            }
            Map<String, String> q = Exchanges.query(ex, "since", "until", "by", "allocation");
            Instant now = clock.instant();
            if (q.containsKey("allocation")) {
                String id = q.get("allocation");
                Optional<AllocationUsage> u;
                try {
                    // an allocation id, or a job's as gpusched report ID takes it: a pod, a Slurm job (review65)
                    u = AllocationUsage.find(store, id).or(() -> AllocationUsage.findJob(store, id));
                } catch (AllocationUsage.JobRanAsSeveralException e) {
                    Exchanges.error(ex, 409, e.getMessage(), "JOB_RAN_AS_SEVERAL");
                    return;
                }
                if (u.isEmpty()) {
                    Exchanges.error(ex, 404, "no usage is recorded for allocation \"" + SampleHistory.printable(id)
                            + "\" (nor for a job of that id)", "UNKNOWN_ALLOCATION");
                    return;
                }
                Exchanges.json(ex, 200, ReportViews.allocation(u.get()));
                return;
            }
            UsageReport.GroupBy by;
            Instant since;
            Instant until;
            try {
                by = UsageReport.GroupBy.parse(q.getOrDefault("by", "owner"));
                since = ReportTimes.parse("since", q.getOrDefault("since", "7d"), now);
                until = q.containsKey("until") ? ReportTimes.parse("until", q.get("until"), now) : now;
            } catch (IllegalArgumentException e) {
                throw new Exchanges.BadQuery(e.getMessage().replace("--by", "by"));
            }
            if (!until.isAfter(since)) {
                throw new Exchanges.BadQuery("until " + until + " is not after since " + since);
            }
            Exchanges.json(ex, 200, ReportViews.report(UsageReport.of(store, since, until, by)));
        });
    }

    private List<Map<String, Object>> idle() {
        List<Map<String, Object>> out = new ArrayList<>();
        IdleStatus.read(store, clock.instant()).forEach((id, s) -> {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("allocation", id);
            m.put("idleSince", s.idleSince().toString());
            m.put("asOf", s.asOf().toString());
            m.put("idleSeconds", s.idleFor().toSeconds());
            m.put("step", s.lastStep().map(x -> x.name().toLowerCase(Locale.ROOT)).orElse(null));
            out.add(m);
        });
        out.sort((a, b) -> String.valueOf(a.get("allocation")).compareTo(String.valueOf(b.get("allocation"))));
        return out;
    }
}
