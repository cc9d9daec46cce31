package io.gpusched.slurm;

import io.gpusched.core.GpuDevice;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** Compares a parsed gres.conf with the node's expected GRES, one line per drift. */
final class GresCheck {
    private GresCheck() {
    }

    /** One GRES device of the file: a File (or MultipleFiles set) with what its line says. */
    private record One(String key, GresRecord from) {
    }

    static List<String> check(SlurmGres expected, List<GresRecord> actual, Map<String, String> leftOutFiles) {
        List<String> drift = new ArrayList<>();
        Map<String, GresRecord> want = new LinkedHashMap<>();
        Map<String, GpuDevice> deviceOf = new LinkedHashMap<>();
        List<GresRecord> rec = expected.records();
        List<GpuDevice> dev = expected.devices();
        for (int i = 0; i < rec.size(); i++) {
            String k = String.join(",", rec.get(i).files());
            want.put(k, rec.get(i));
            deviceOf.put(k, dev.get(i));
        }
        Map<String, One> have = new LinkedHashMap<>();
        long fileCount = 0;
        for (GresRecord r : actual) {
            if (r.files().isEmpty()) {
                drift.add("line " + r.line() + ": Name=gpu without File= (Slurm requires File for gpu GRES)");
                continue;
            }
            int n = r.multipleFiles() ? 1 : r.files().size();
            if (r.count().isPresent() && r.count().getAsLong() != n) {
                drift.add("wrong count at line " + r.line() + ": Count=" + r.count().getAsLong() + " but the line"
                        + " names " + n + " device" + (n == 1 ? "" : "s"));
            }
            if (r.multipleFiles()) {
                put(have, drift, new One(String.join(",", r.files()), r));
            } else {
                for (String f : r.files()) {
                    put(have, drift, new One(f, r));
                }
            }
            fileCount += n;
        }
        // positions in file order, for Links
        List<String> order = new ArrayList<>(have.keySet());
        for (Map.Entry<String, GresRecord> w : want.entrySet()) {
            if (!have.containsKey(w.getKey())) {
                GpuDevice d = deviceOf.get(w.getKey());
                drift.add("missing " + (w.getValue().multipleFiles() ? "MultipleFiles=" : "File=") + w.getKey()
                        + ": GPU " + d.index() + " (" + d.uuid() + ", Type=" + w.getValue().type().orElse("?")
                        + ") is on the node but not in gres.conf");
            }
        }
        for (One o : have.values()) {
            if (!want.containsKey(o.key())) {
                String why = leftOutFiles.get(o.key());
                drift.add("extra File=" + o.key() + " (line " + o.from().line() + "): " + (why != null
                        ? why + ", so gpusched leaves it out" : "no GPU of this node has this device file"));
            }
        }
        // Links= count by position in the file: with a device missing or extra every position after it moves, so
        // the values are compared only when the file lists the node's devices (the missing/extra lines say the rest)
        boolean sameDevices = have.keySet().equals(want.keySet());
        if (!sameDevices && want.values().stream().anyMatch(r -> r.links().isPresent())) {
            drift.add("Links= not compared: gres.conf lists other devices than the node (see the missing/extra"
                    + " lines), and Links= count by position in the file");
        }
        for (Map.Entry<String, GresRecord> w : want.entrySet()) {
            One o = have.get(w.getKey());
            if (o == null) {
                continue;
            }
            GresRecord e = w.getValue();
            GresRecord a = o.from();
            String at = "File=" + w.getKey() + " (line " + a.line() + ")";
            if (e.type().isPresent() && !e.type().equals(a.type())) {
                drift.add("wrong Type for " + at + ": " + a.type().orElse("none") + " in gres.conf, "
                        + e.type().get() + " on the node");
            }
            if (e.cores().isPresent() && !e.cores().equals(a.cores())) {
                drift.add("wrong Cores for " + at + ": " + a.cores().map(GresRecord::formatIntList).orElse("none")
                        + " in gres.conf, " + GresRecord.formatIntList(e.cores().get()) + " on the node");
            }
            if (e.links().isPresent() && sameDevices) {
                linkDrift(drift, at, w.getKey(), e.links().get(), new ArrayList<>(want.keySet()), a, order);
            }
        }
        if (fileCount != want.size()) {
            drift.add("wrong count: gres.conf has " + fileCount + " gpu device" + (fileCount == 1 ? "" : "s")
                    + ", the node " + want.size() + " (Gres=" + expected.gresValue() + ")");
        }
        return drift;
    }

    private static void put(Map<String, One> have, List<String> drift, One o) {
        One old = have.putIfAbsent(o.key(), o);
        if (old != null) {
            drift.add("File=" + o.key() + " given twice (lines " + old.from().line() + " and " + o.from().line()
                    + ")");
        }
    }

    private static void linkDrift(List<String> drift, String at, String key, List<Integer> want, List<String> wantOrder,
            GresRecord a, List<String> haveOrder) {
        if (a.links().isEmpty()) {
            drift.add("missing Links for " + at + ": the node's are " + join(want));
            return;
        }
        List<Integer> got = a.links().get();
        if (a.files().size() != 1) {
            drift.add("wrong Links for " + at + ": Links= on a line of " + a.files().size() + " files (Slurm takes one"
                    + " device per line with Links)");
            return;
        }
        if (got.size() != haveOrder.size()) {
            drift.add("wrong Links for " + at + ": " + got.size() + " values for " + haveOrder.size()
                    + " devices in gres.conf");
            return;
        }
        List<String> diffs = new ArrayList<>();
        for (int j = 0; j < wantOrder.size(); j++) {
            String peer = wantOrder.get(j);
            int p = haveOrder.indexOf(peer);
            if (p < 0) {
                continue; // a missing peer is its own drift line
            }
            int g = got.get(p);
            int w = want.get(j);
            if (g != w) {
                diffs.add("to " + peer + " " + (g == -1 ? "self" : String.valueOf(g)) + " in gres.conf, "
                        + (w == -1 ? "self" : String.valueOf(w)) + " on the node");
            }
        }
        if (!diffs.isEmpty()) {
            drift.add("wrong Links for " + at + ": " + String.join("; ", diffs));
        }
    }

    private static String join(List<Integer> l) {
        return String.join(",", l.stream().map(String::valueOf).toList());
    }
}
