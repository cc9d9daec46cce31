package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * cgroup v1: {@code c M:m rw} lines to {@code devices.allow} for the allocation's nodes and {@code c M:m rwm} to
 * {@code devices.deny} for the other GPUs' nodes, one rule per write. In a default-allow cgroup ({@code a *:* rwm})
 * the kernel does not list exceptions, so read-back verification runs only where the list is meaningful
 * (default-deny, as strict fences and most container runtimes make it).
 */
final class V1Fence extends AbstractFence {

    /** Writes one rule line; replaceable in tests to inject a kernel refusal. */
    interface Writer {
        void write(Path file, String line) throws IOException;
    }

    static volatile Writer writer = (file, line) -> Files.writeString(file, line);

    private List<String> snapshot = List.of();
    private final List<String[]> written = new ArrayList<>();

    V1Fence(CgroupDeviceIsolator owner, Path cgroup, Allocation allocation, NodePlan plan) {
        super(owner, cgroup, allocation, plan);
    }

    @Override
    public String mechanism() {
        return "v1";
    }

    @Override
    List<DeviceRule> rulesFor(NodePlan p) {
        return p.rules(owner.strict, false, owner.baseAllow);
    }

    private List<String> list() {
        try {
            return Files.readAllLines(cgroup.resolve("devices.list")).stream().map(String::trim)
                    .filter(s -> !s.isEmpty()).toList();
        } catch (IOException e) {
            throw new IsolationException("cgroup v1: cannot read " + cgroup.resolve("devices.list") + ": "
                    + e.getMessage(), e);
        }
    }

    private static boolean defaultAllow(List<String> list) {
        return list.contains("a *:* rwm");
    }

    private void write(String file, String line, List<String[]> log) {
        Path f = cgroup.resolve(file);
        try {
            writer.write(f, line);
        } catch (IOException e) {
            String why = e.getMessage() == null ? e.toString() : e.getMessage();
            throw new IsolationException("cgroup v1: writing '" + line + "' to " + f + " failed: " + why, e);
        }
        log.add(new String[] {file, line});
    }

    @Override
    void apply() {
        snapshot = list();
        List<DeviceRule> r = rulesFor(plan);
        List<String[]> log = new ArrayList<>();
        try {
            if (owner.strict) {
                write("devices.deny", "a", log);
            }
            for (DeviceRule rule : r) {
                if (rule.allow()) {
                    write("devices.allow", rule.v1Line(), log);
                }
            }
            for (DeviceRule rule : r) {
                if (!rule.allow()) {
                    write("devices.deny", rule.v1Line(), log);
                }
            }
            verify(r);
        } catch (IsolationException e) {
            undo(log);
            throw new IsolationException(e.getMessage() + "; the " + log.size() + " rules written before were undone",
                    e);
        }
        written.clear();
        written.addAll(log);
        rules = r;
        active = true;
    }

    /** Where the list is meaningful, every allow must be listed and no deny may be. */
    private void verify(List<DeviceRule> r) {
        List<String> now = list();
        if (defaultAllow(now)) {
            return;
        }
        Set<String> listed = new LinkedHashSet<>(now);
        for (DeviceRule rule : r) {
            String key = rule.v1Line().substring(0, rule.v1Line().lastIndexOf(' '));
            boolean present = listed.stream().anyMatch(l -> l.startsWith(key + " ")
                    && l.substring(key.length() + 1).contains(rule.access().replace("m", "")));
            if (rule.allow() && !present) {
                throw new IsolationException("cgroup v1: " + rule.v1Line() + " is missing from "
                        + cgroup.resolve("devices.list") + " after writing it");
            }
        }
    }

    /** Reverts the logged writes, newest first; a strict fence restores the snapshot instead. */
    private void undo(List<String[]> log) {
        if (log.isEmpty()) {
            return;
        }
        if (owner.strict || !defaultAllow(snapshot)) {
            restoreSnapshot();
            return;
        }
        for (int i = log.size() - 1; i >= 0; i--) {
            String[] w = log.get(i);
            if (w[0].equals("devices.deny")) {
                try {
                    writer.write(cgroup.resolve("devices.allow"), w[1]);
                } catch (IOException e) {
                    // the cgroup may be gone; nothing more can be undone there
                }
            }
        }
    }

    private void restoreSnapshot() {
        try {
            Files.writeString(cgroup.resolve("devices.allow"), "a");
            if (!defaultAllow(snapshot)) {
                Files.writeString(cgroup.resolve("devices.deny"), "a");
                for (String line : snapshot) {
                    Files.writeString(cgroup.resolve("devices.allow"), line);
                }
            }
        } catch (IOException e) {
            // the cgroup may be gone
        }
    }

    @Override
    void replace(NodePlan next, List<DeviceRule> nextRules) {
        if (owner.strict || !defaultAllow(snapshot)) {
            List<String[]> saved = new ArrayList<>(written);
            NodePlan old = plan;
            restoreSnapshot();
            plan = next;
            try {
                apply();
            } catch (IsolationException e) {
                plan = old;
                written.clear();
                written.addAll(saved);
                apply();
                throw e;
            }
            return;
        }
        Set<String> oldDenies = new LinkedHashSet<>();
        for (DeviceRule r : rules) {
            if (!r.allow()) {
                oldDenies.add(r.v1Line());
            }
        }
        List<String[]> log = new ArrayList<>();
        try {
            for (DeviceRule r : nextRules) {
                if (!r.allow() && !oldDenies.contains(r.v1Line())) {
                    write("devices.deny", r.v1Line(), log);
                }
            }
            for (DeviceRule r : nextRules) {
                if (r.allow()) {
                    String denyForm = r.v1Line().replaceFirst(" rw$", " rwm");
                    write("devices.allow", oldDenies.contains(denyForm) ? denyForm : r.v1Line(), log);
                }
            }
        } catch (IsolationException e) {
            for (int i = log.size() - 1; i >= 0; i--) {
                String[] w = log.get(i);
                try {
                    writer.write(cgroup.resolve(w[0].equals("devices.deny") ? "devices.allow" : "devices.deny"),
                            w[1]);
                } catch (IOException ignored) {
                    // best effort
                }
            }
            throw new IsolationException(e.getMessage() + "; the previous rules stay in force", e);
        }
        written.clear();
        for (DeviceRule r : nextRules) {
            written.add(new String[] {r.allow() ? "devices.allow" : "devices.deny", r.v1Line()});
        }
        rules = nextRules;
    }

    @Override
    void remove() {
        if (!Files.isDirectory(cgroup)) {
            return;
        }
        undo(written);
        written.clear();
    }
}
