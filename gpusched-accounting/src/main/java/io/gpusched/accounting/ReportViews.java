package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A report as JSON-ready maps (the command's {@code --json} and the REST API give the same shape), as a text table and
 * as CSV. Units: GPU-hours, kWh, percent, bytes; {@code null} where a figure was not measured.
 */
public final class ReportViews {
    private ReportViews() {
    }

    /** @return the figures as a map: gpuHours, kwh, energyEstimated, meanUtilization, peakUtilization, ... */
    public static Map<String, Object> figures(UsageFigures f) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("gpuSeconds", round(f.heldMillis() / 1000.0, 3));
        m.put("gpuHours", round(f.heldMillis() / 3.6e6, 4));
        m.put("sampledSeconds", round(f.measuredMillis() / 1000.0, 3));
        m.put("energyJoules", f.energyMillis() > 0 ? round(f.energyMillijoules() / 1000.0, 3) : null);
        m.put("kwh", f.energyMillis() > 0 ? round(f.kilowattHours(), 6) : null);
        m.put("energyEstimated", f.energyEstimated());
        m.put("meanUtilization", f.meanUtilization().isPresent() ? round(f.meanUtilization().getAsDouble(), 2)
                : null);
        m.put("peakUtilization", f.peakUtilization().isPresent() ? f.peakUtilization().getAsDouble() : null);
        m.put("idleSeconds", round(f.idleMillis() / 1000.0, 3));
        m.put("idleFraction", f.idleFraction().isPresent() ? round(f.idleFraction().getAsDouble(), 4) : null);
        m.put("peakMemoryBytes", f.memoryPeakBytes().isPresent() ? f.memoryPeakBytes().getAsLong() : null);
        return m;
    }

    /** @return the report as a map (the JSON of {@code gpusched report --json} and {@code /api/v1/usage}) */
    public static Map<String, Object> report(UsageReport r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("since", r.since().toString());
        m.put("until", r.until().toString());
        m.put("by", r.by().word());
        m.put("allocations", r.allocations());
        m.put("total", figures(r.total()));
        List<Map<String, Object>> rows = new ArrayList<>();
        for (UsageReport.Row row : r.rows()) {
            Map<String, Object> x = new LinkedHashMap<>();
            x.put("key", row.key());
            if (r.by() == UsageReport.GroupBy.POD || r.by() == UsageReport.GroupBy.SLURM_JOB) {
                x.put("owner", row.owner().orElse(null));
            }
            if (r.by() == UsageReport.GroupBy.ALLOCATION) {
                x.put("owner", row.owner().orElse(null));
                x.put("job", row.jobId().orElse(null));
                x.put("from", row.from().toString());
                x.put("to", row.to().toString());
                x.put("end", row.end().orElse(null));
            }
            x.put("gpus", row.devices());
            x.put("allocations", row.allocations());
            x.putAll(figures(row.figures()));
            x.put("idleSteps", row.idleSteps().stream().map(s -> s.name().toLowerCase(Locale.ROOT)).sorted()
                    .toList());
            x.put("notes", row.notes());
            rows.add(x);
        }
        m.put("rows", rows);
        m.put("idle", idle(r.idle()));
        m.put("warnings", r.warnings());
        return m;
    }

    /** @return one allocation's usage as a map */
    public static Map<String, Object> allocation(AllocationUsage u) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", u.id());
        m.put("owner", u.owner().orElse(null));
        m.put("job", u.jobId().orElse(null));
        m.put("from", u.from().toString());
        m.put("to", u.to().toString());
        m.put("end", u.end().orElse(null));
        m.put("complete", u.complete());
        m.put("verdict", u.verdict());
        m.put("total", figures(u.total()));
        List<Map<String, Object>> ds = new ArrayList<>();
        for (AllocationUsage.Device d : u.devices()) {
            Map<String, Object> x = new LinkedHashMap<>();
            x.put("gpu", d.index());
            x.put("uuid", d.uuid());
            x.putAll(figures(d.figures()));
            x.put("notes", d.notes());
            ds.add(x);
        }
        m.put("gpus", ds);
        m.put("unsampledSeconds", round(u.gaps() / 1000.0, 3));
        m.put("idle", idle(u.idle()));
        return m;
    }

    private static List<Map<String, Object>> idle(List<IdleAction> actions) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (IdleAction a : actions) {
            Map<String, Object> x = new LinkedHashMap<>();
            x.put("at", a.at().toString());
            x.put("allocation", a.allocationId());
            x.put("owner", a.owner().orElse(null));
            x.put("step", a.action().name().toLowerCase(Locale.ROOT));
            x.put("idleSeconds", a.idleFor().toSeconds());
            x.put("detail", a.detail());
            out.add(x);
        }
        return out;
    }

    /**
     * @return the label of the row of allocations without an owner: {@code (no owner)} (by pod or Slurm job: the row
     *         of the rest, {@code (no pod)}, {@code (no Slurm job)}), with a {@code *} added while
     *         an owner of the report has that name (any printable text can be an owner's name: review53)
     */
    static String noOwnerLabel(UsageReport r) {
        Set<String> owners = new HashSet<>();
        boolean jobs = r.by() == UsageReport.GroupBy.POD || r.by() == UsageReport.GroupBy.SLURM_JOB;
        for (UsageReport.Row row : r.rows()) {
            if (jobs) { // as printed: the job, then its owner
                owners.add(row.key() + row.owner().map(o -> " " + o).orElse(""));
            } else {
                row.owner().ifPresent(owners::add);
            }
        }
        String label = r.by() == UsageReport.GroupBy.POD ? "(no pod)" : r.by() == UsageReport.GroupBy.SLURM_JOB
                ? "(no Slurm job)" : "(no owner)";
        // as printed: a flagged row reads "<label> (idle)", so neither form may be an owner's (review57)
        while (owners.contains(label) || owners.contains(label + " (idle)")) {
            label += "*";
        }
        return label;
    }

    /**
     * @return the total line's label: {@code total}, with a {@code *} added while a row has that label (an owner may be
     *         named so: review56)
     */
    private static String totalLabel(List<String[]> lines) {
        Set<String> labels = new HashSet<>();
        for (String[] l : lines) {
            labels.add(l[0]);
        }
        String label = "total";
        while (labels.contains(label)) {
            label += "*";
        }
        return label;
    }

    /** @return the report as a text table with a total line */
    public static String text(UsageReport r) {
        StringBuilder b = new StringBuilder();
        b.append("GPU usage ").append(r.since()).append(" to ").append(r.until()).append(", by ")
                .append(r.by().word()).append('\n');
        String[] head = {r.by().word(), "allocs", "GPU-h", "kWh", "mean util", "idle",
            "peak mem"};
        List<String[]> lines = new ArrayList<>();
        lines.add(head);
        String noOwner = noOwnerLabel(r);
        for (UsageReport.Row row : r.rows()) {
            boolean jobs = r.by() == UsageReport.GroupBy.POD || r.by() == UsageReport.GroupBy.SLURM_JOB;
            String key = jobs && row.key().isEmpty() ? noOwner
                    : r.by() == UsageReport.GroupBy.ALLOCATION || jobs ? row.key() + row.owner().map(o -> " " + o)
                            .orElse("")
                    : r.by() == UsageReport.GroupBy.OWNER && row.owner().isEmpty() ? noOwner
                    : row.key();
            lines.add(cells(safe(key), row.allocations(), row.figures(), row.idleSteps()));
        }
        lines.add(cells(totalLabel(lines), r.allocations(), r.total(), Set.of()));
        int[] w = new int[head.length];
        for (String[] l : lines) {
            for (int i = 0; i < l.length; i++) {
                w[i] = Math.max(w[i], l[i].length());
            }
        }
        for (String[] l : lines) {
            for (int i = 0; i < l.length; i++) {
                b.append(i == 0 ? pad(l[i], w[i]) : lpad(l[i], w[i]));
                b.append(i + 1 < l.length ? "  " : "\n");
            }
        }
        if (r.total().energyEstimated()) {
            b.append("kWh marked ~ are partly or wholly estimated (no energy counter, or a shared GPU's energy"
                    + " split by utilization share)\n");
        }
        long flagged = r.idle().stream().filter(a -> a.action() == IdleStep.FLAGGED).count();
        if (flagged > 0) {
            b.append(flagged).append(" idle allocation(s) flagged in the period (gpusched report ID for each)\n");
        }
        for (String wmsg : r.warnings()) {
            b.append("warning: ").append(safe(wmsg)).append('\n');
        }
        return b.toString();
    }

    private static String[] cells(String key, long allocs, UsageFigures f, Set<IdleStep> steps) {
        String util = f.meanUtilization().isPresent()
                ? String.format(Locale.ROOT, "%.1f %%", f.meanUtilization().getAsDouble())
                : "n/m";
        String idle = f.idleFraction().isPresent()
                ? String.format(Locale.ROOT, "%.0f %%", 100 * f.idleFraction().getAsDouble())
                : "n/m";
        String kwh = f.energyMillis() > 0 ? (f.energyEstimated() ? "~" : "") + String.format(Locale.ROOT, "%.3f",
                f.kilowattHours()) : "n/m";
        String mem =
                f.memoryPeakBytes().isPresent() ? String.format(Locale.ROOT, "%.1f GiB", f.memoryPeakBytes().getAsLong()
                        / (double) (1L << 30)) : "n/m";
        String k = steps.contains(IdleStep.FLAGGED) || steps.contains(IdleStep.WARNED) ? key + " (idle)" : key;
        return new String[]{k, Long.toString(allocs), String.format(Locale.ROOT, "%.2f", f.heldMillis() / 3.6e6), kwh,
            util,
            idle, mem};
    }

    /**
     * @return the report as CSV (RFC 4180, a header line; empty cells where not measured); by allocation, pod or Slurm
     *         job an {@code owner} column follows the key (the allocation's owner, the pod's namespace, the job's user)
     */
    public static String csv(UsageReport r) {
        boolean owners = r.by() == UsageReport.GroupBy.ALLOCATION || r.by() == UsageReport.GroupBy.POD
                || r.by() == UsageReport.GroupBy.SLURM_JOB;
        StringBuilder b = new StringBuilder(r.by().word() + (owners ? ",owner" : "")
                + ",allocations,gpu_hours,kwh,energy_estimated,mean_utilization,peak_utilization,idle_fraction,"
                + "peak_memory_bytes,sampled_fraction\n");
        Set<String> keys = new HashSet<>();
        for (UsageReport.Row row : r.rows()) {
            csvRow(b, row.key(), owners ? Optional.of(row.owner().orElse("")) : Optional.empty(), row.allocations(),
                    row.figures());
            keys.add(row.key());
        }
        String total = "total"; // a key of its own: an owner may be named so (review57)
        while (keys.contains(total)) {
            total += "*";
        }
        csvRow(b, total, owners ? Optional.of("") : Optional.empty(), r.allocations(), r.total());
        return b.toString();
    }

    /** @return a CSV cell, quoted, with no formula a spreadsheet would run */
    private static String csvCell(String text) {
        String k = text;
        if (k.startsWith("=") || k.startsWith("+") || k.startsWith("-") && k.length() > 1 || k.startsWith("@")) {
            k = "'" + k; // no formula in a spreadsheet
        }
        return '"' + k.replace("\"", "\"\"") + '"';
    }

    private static void csvRow(StringBuilder b, String key, Optional<String> owner, long allocs, UsageFigures f) {
        b.append(csvCell(key)).append(',');
        owner.ifPresent(o -> b.append(csvCell(o)).append(','));
        b.append(allocs).append(',')
                .append(String.format(Locale.ROOT, "%.4f", f.heldMillis() / 3.6e6)).append(',')
                .append(f.energyMillis() > 0 ? String.format(Locale.ROOT, "%.6f", f.kilowattHours()) : "")
                .append(',').append(f.energyEstimated()).append(',')
                .append(f.meanUtilization().isPresent() ? String.format(Locale.ROOT, "%.2f",
                        f.meanUtilization().getAsDouble()) : "")
                .append(',')
                .append(f.peakUtilization().isPresent() ? String.format(Locale.ROOT, "%.1f",
                        f.peakUtilization().getAsDouble()) : "")
                .append(',')
                .append(f.idleFraction().isPresent() ? String.format(Locale.ROOT, "%.4f",
                        f.idleFraction().getAsDouble()) : "")
                .append(',')
                .append(f.memoryPeakBytes().isPresent() ? Long.toString(f.memoryPeakBytes().getAsLong()) : "")
                .append(',').append(f.heldMillis() > 0 ? String.format(Locale.ROOT, "%.4f",
                        (double) f.measuredMillis() / f.heldMillis()) : "")
                .append('\n');
    }

    /** @return one allocation's usage as text: a header, a line per GPU, the verdict */
    public static String text(AllocationUsage u) {
        StringBuilder b = new StringBuilder();
        b.append("Allocation ").append(safe(u.id())).append(u.owner().map(o -> "  owner " + safe(o)).orElse(""))
                .append(u.jobId().map(j -> "  job " + safe(j)).orElse("")).append('\n');
        b.append("  ").append(u.complete() ? "granted " : "from ").append(u.from()).append(", ")
                .append(u.end().map(e -> e.toLowerCase(Locale.ROOT) + " " + u.to()).orElse("running (last record "
                        + u.to() + ")"))
                .append('\n');
        for (AllocationUsage.Device d : u.devices()) {
            b.append("  GPU ").append(d.index()).append(" ").append(safe(d.uuid())).append(": ")
                    .append(AllocationUsage.verdict(1, d.figures())).append('\n');
            for (String n : d.notes()) {
                b.append("    note: ").append(safe(n)).append('\n');
            }
        }
        for (IdleAction a : u.idle()) {
            b.append("  idle ").append(a.action().name().toLowerCase(Locale.ROOT)).append(" at ").append(a.at())
                    .append(": ").append(safe(a.detail())).append('\n');
        }
        b.append(u.verdict()).append('\n');
        return b.toString();
    }

    /** @return text with control characters shown as \\uXXXX, safe for a terminal */
    static String safe(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 0x20 || c == 0x7f || c >= 0x80 && c < 0xa0) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    private static String pad(String s, int w) {
        return s + " ".repeat(Math.max(0, w - s.length()));
    }

    private static String lpad(String s, int w) {
        return " ".repeat(Math.max(0, w - s.length())) + s;
    }

    private static double round(double v, int digits) {
        double f = Math.pow(10, digits);
        return Math.round(v * f) / f;
    }
}
