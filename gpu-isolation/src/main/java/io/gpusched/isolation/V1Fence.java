package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import io.gpusched.core.devices.DeviceNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;

/**
 * cgroup v1 devices controller, driven as the kernel keeps it: a default behavior and a list of exceptions, changed
 * one rule per write. Every change goes from the state in force to the next one by first writing every grant and
 * only then every removal, so at each instant the devices a job can open are a subset of the old state's and the new
 * state's; {@code a} is never written. A failed write rolls back what was written, newest first, and the previous
 * state is read back.
 *
 * <p>Two modes, by the cgroup's policy when it is first fenced:
 * <ul>
 *   <li>default-deny (container runtimes, {@code devices.list} lists the allow exceptions): the fence's state is a
 *   whole exception list, computed from the host's list (or the strict base) with every rule that covers a denied
 *   GPU removed; a wildcard minor ({@code c 195:* rwm}) is replaced by its explicit complement over the major's minors
 *   (0..255, or the highest planned minor); a wildcard major that gives r or w on a denied GPU is refused (an m-only
 *   rule such as runc's {@code c *:* m} is kept: it lets a job make a node, not open it). Read-back compares
 *   the whole list, so a deny that did not take (a rule still covering it) is caught. Revoke goes back to the host's
 *   list exactly.</li>
 *   <li>default-allow (the kernel hides the exceptions, which are denies): before any write, the host's own denies of
 *   each GPU node are observed through a short-lived probe child cgroup (switched to default-deny, an allow written to
 *   it is refused exactly when the parent denies it); denied bits a fence recorded ({@link V1Record}, written before
 *   the rules) are ours, the rest the host's. A node the plan allows but the host denies is refused before any write.
 *   The fence adds only deny bits the host did not already have and lifts only recorded ones; read-back probes the
 *   denies too. Strict fences are refused here: leaving default-allow and
 *   coming back needs {@code a}, which would lose the host's hidden denies.</li>
 * </ul>
 *
 * <p>Why it is over 500 lines: the v1 controller's two modes, the wildcard complements and the ordered,
 * rolled-back writes are one state machine over one file; splitting it would split the ordering argument.
 */
final class V1Fence extends AbstractFence {

    /** Writes one rule line; replaceable in tests to inject a kernel refusal. */
    interface Writer {
        void write(Path file, String line) throws IOException;
    }

    static final Writer KERNEL = (file, line) -> Files.writeString(file, line);
    static volatile Writer writer = KERNEL;

    static final int M = 1;
    static final int R = 2;
    static final int W = 4;
    static final int RWM = 7;
    static final int NO_MINOR_ABOVE = 255;

    /** One exception's key as the kernel matches it on removal: type and numbers, {@link DeviceRule#ANY} for *. */
    record Key(char type, int major, int minor) {
        String line(int bits) {
            return type + " " + (major == DeviceRule.ANY ? "*" : String.valueOf(major)) + ":"
                    + (minor == DeviceRule.ANY ? "*" : String.valueOf(minor)) + " " + access(bits);
        }

        boolean coversChar(int maj, int min) {
            return (type == 'c' || type == 'a') && (major == DeviceRule.ANY || major == maj)
                    && (minor == DeviceRule.ANY || minor == min);
        }
    }

    /** What {@code devices.list} shows: default-allow (no exceptions visible), or the allow exceptions. */
    record State(boolean defaultAllow, Map<Key, Integer> exceptions) {
    }

    private CgroupDir.Id id;
    private boolean allowMode;
    /** default-deny: the host's exception list when first fenced. */
    private Map<Key, Integer> host = Map.of();
    /** default-allow: the deny bits the host itself had on each probed node. */
    private final Map<Key, Integer> hostDenied = new LinkedHashMap<>();
    /** default-deny: the whole list the fence keeps; default-allow: the deny bits the fence added. */
    private Map<Key, Integer> state = Map.of();

    V1Fence(CgroupDeviceIsolator owner, Path cgroup, Allocation allocation, NodePlan plan) {
        super(owner, cgroup, allocation, plan);
    }

    @Override
    public String mechanism() {
        return "v1";
    }

    @Override
    CgroupDir.Id id() {
        return id;
    }

    @Override
    List<DeviceRule> rulesFor(NodePlan p) {
        List<DeviceRule> out = new ArrayList<>();
        for (Map.Entry<Key, Integer> e : state.entrySet()) {
            Key k = e.getKey();
            out.add(new DeviceRule(!allowMode, k.type(), k.major(), k.minor(), access(e.getValue())));
        }
        return List.copyOf(out);
    }

    // ---- reading

    static String access(int bits) {
        return ((bits & R) != 0 ? "r" : "") + ((bits & W) != 0 ? "w" : "") + ((bits & M) != 0 ? "m" : "");
    }

    static int bits(String access) {
        return (access.contains("r") ? R : 0) | (access.contains("w") ? W : 0) | (access.contains("m") ? M : 0);
    }

    static Key key(DeviceNode n) {
        return new Key('c', n.major(), n.minor());
    }

    /** Parses {@code devices.list}. */
    static State parse(List<String> lines, Path where) {
        Map<Key, Integer> out = new LinkedHashMap<>();
        for (String raw : lines) {
            String l = raw.trim();
            if (l.isEmpty()) {
                continue;
            }
            String[] f = l.split(" ");
            String[] mm = f.length == 3 ? f[1].split(":") : new String[0];
            if (f.length != 3 || f[0].length() != 1 || mm.length != 2) {
                throw new IsolationException("cgroup v1: cannot parse line '" + l + "' of " + where);
            }
            if (l.equals("a *:* rwm")) {
                return new State(true, Map.of());
            }
            Key k = new Key(f[0].charAt(0), mm[0].equals("*") ? DeviceRule.ANY : Integer.parseInt(mm[0]),
                    mm[1].equals("*") ? DeviceRule.ANY : Integer.parseInt(mm[1]));
            out.merge(k, bits(f[2]), (a, b) -> a | b);
        }
        return new State(false, out);
    }

    private State read(CgroupDir d) {
        try {
            return parse(Files.readAllLines(d.file("devices.list")), cgroup.resolve("devices.list"));
        } catch (IOException e) {
            throw new IsolationException("cgroup v1: cannot read " + cgroup.resolve("devices.list") + ": "
                    + e.getMessage(), e);
        }
    }

    // ---- planning

    /**
     * @return the state a plan needs, in the cgroup's mode; default-allow: {@link #observe} has probed every node of
     *         the plan
     * @throws IsolationException before any write when the host's policy denies (r or w) a node the plan allows
     */
    Map<Key, Integer> target(NodePlan p, CgroupDir d) {
        if (allowMode) {
            Map<Key, Integer> t = new LinkedHashMap<>();
            for (DeviceNode n : p.allowed()) {
                int host = hostDenied.getOrDefault(key(n), 0);
                if ((host & (R | W)) != 0) {
                    throw new IsolationException("cgroup v1: the host's policy denies " + owner.describe(n) + " to "
                            + cgroup + ": the host rule 'deny " + key(n).line(host) + "' (a deny exception of this"
                            + " default-allow cgroup, set in it or inherited from its parent " + cgroup.getParent()
                            + "; devices.list does not show it, a probe cgroup did) is not one a fence added, so no"
                            + " fence lifts it; nothing was written, what was in force stays");
                }
            }
            for (DeviceNode n : p.denied()) {
                int mine = RWM & ~hostDenied.getOrDefault(key(n), 0);
                if (mine != 0) {
                    t.merge(key(n), mine, (a, b) -> a | b);
                }
            }
            return t;
        }
        return denyListTarget(p, owner.strict ? baseRules(owner.baseAllow) : host, cgroup);
    }

    static Map<Key, Integer> baseRules(List<DeviceRule> base) {
        Map<Key, Integer> t = new LinkedHashMap<>();
        for (DeviceRule r : base) {
            if (r.allow()) {
                t.merge(new Key(r.type(), r.major(), r.minor()), bits(r.access()), (a, b) -> a | b);
            }
        }
        return t;
    }

    /** The default-deny list that keeps {@code start} except what reaches a denied node, plus the allowed nodes. */
    static Map<Key, Integer> denyListTarget(NodePlan p, Map<Key, Integer> start, Path where) {
        Map<Key, Integer> t = new LinkedHashMap<>(start);
        Map<Integer, Set<Integer>> deniedMinors = new LinkedHashMap<>();
        Map<Integer, Integer> upper = new LinkedHashMap<>();
        for (DeviceNode n : p.denied()) {
            deniedMinors.computeIfAbsent(n.major(), k -> new HashSet<>()).add(n.minor());
        }
        for (DeviceNode n : concat(p.allowed(), p.denied())) {
            upper.merge(n.major(), Math.max(NO_MINOR_ABOVE, n.minor()), Math::max);
        }
        for (DeviceNode n : p.denied()) {
            for (Key k : List.copyOf(t.keySet())) {
                if (!k.coversChar(n.major(), n.minor()) || (t.get(k) & (R | W)) == 0) {
                    continue; // an m-only rule (runc's c *:* m) lets a job make a node, never open one
                }
                if (k.major() == DeviceRule.ANY) {
                    throw new IsolationException("cgroup v1: the rule '" + k.line(t.get(k)) + "' of " + where
                            + " allows every major, so no single GPU can be denied under it (" + n.path() + " is "
                            + n.major() + ":" + n.minor() + "); give the cgroup per-major rules or use cgroup v2");
                }
                int b = t.remove(k);
                if (k.minor() == DeviceRule.ANY) {
                    Set<Integer> no = deniedMinors.get(k.major());
                    for (int m = 0; m <= upper.get(k.major()); m++) {
                        if (!no.contains(m)) {
                            t.merge(new Key('c', k.major(), m), b, (x, y) -> x | y);
                        }
                    }
                }
            }
        }
        for (DeviceNode n : p.allowed()) {
            t.merge(key(n), R | W, (a, b) -> a | b);
        }
        return t;
    }

    private static List<DeviceNode> concat(List<DeviceNode> a, List<DeviceNode> b) {
        List<DeviceNode> out = new ArrayList<>(a);
        out.addAll(b);
        return out;
    }

    // ---- probing a default-allow cgroup's hidden denies

    /**
     * default-allow: probes every node of the plans and every recorded key, and splits what the kernel denies into the
     * bits a fence (of any process, maybe dead) recorded before writing them, which are ours, and the rest, which are
     * the host's ({@link #hostDenied}).
     *
     * @return the deny bits of ours in force now
     */
    private Map<Key, Integer> observe(CgroupDir d, Map<Key, Integer> recorded, NodePlan... plans) {
        List<Key> keys = new ArrayList<>();
        for (NodePlan p : plans) {
            for (DeviceNode n : concat(p.allowed(), p.denied())) {
                if (!keys.contains(key(n))) {
                    keys.add(key(n));
                }
            }
        }
        recorded.keySet().stream().filter(k -> !keys.contains(k)).forEach(keys::add);
        Map<Key, Integer> seen = probe(d, keys);
        Map<Key, Integer> ours = new LinkedHashMap<>();
        hostDenied.clear();
        for (Key k : keys) {
            int rec = recorded.getOrDefault(k, 0);
            hostDenied.put(k, seen.get(k) & ~rec);
            if ((seen.get(k) & rec) != 0) {
                ours.put(k, seen.get(k) & rec);
            }
        }
        return ours;
    }

    /** @return the denies a fence recorded for this default-allow cgroup (a record of another kind is dropped) */
    private Map<Key, Integer> recordedDenies(CgroupDir d) {
        Optional<V1Record.Entry> rec = V1Record.read(owner.stateDir, d.id, cgroup);
        if (rec.isPresent() && rec.get().kind() == V1Record.Kind.OUR_DENIES) {
            return rec.get().rules();
        }
        if (rec.isPresent()) {
            // a host list: never made by a v1 fence (it does not write 'a'): someone made the cgroup default-allow
            V1Record.delete(owner.stateDir, d.id);
        }
        return Map.of();
    }

    /** @return per key, the bits of either map */
    static Map<Key, Integer> union(Map<Key, Integer> a, Map<Key, Integer> b) {
        Map<Key, Integer> out = new LinkedHashMap<>(a);
        b.forEach((k, v) -> out.merge(k, v, (x, y) -> x | y));
        return out;
    }

    /**
     * default-allow: goes from the denies of ours in force to {@code to}, with the record covering both before the
     * first write and exactly {@code to} after the last (removed when empty).
     */
    private void moveDenies(CgroupDir d, Map<Key, Integer> from, Map<Key, Integer> to, NodePlan p, String what) {
        V1Record.write(owner.stateDir, d.id, cgroup, V1Record.Kind.OUR_DENIES, union(from, to));
        transition(d, from, to, p, what);
        if (to.isEmpty()) {
            if (!V1Record.delete(owner.stateDir, d.id)) {
                throw new IsolationException("cgroup v1: the fence's denies of " + cgroup + " are lifted, but their"
                        + " record " + V1Record.file(owner.stateDir, d.id) + " could not be removed");
            }
        } else if (!to.equals(union(from, to))) {
            V1Record.write(owner.stateDir, d.id, cgroup, V1Record.Kind.OUR_DENIES, to);
        }
    }

    /**
     * @return per key, the access bits the cgroup denies: a child cgroup made default-deny is given each bit in turn;
     *         the kernel refuses (EPERM) exactly the bits the parent's exceptions overlap
     */
    private Map<Key, Integer> probe(CgroupDir d, List<Key> keys) {
        Path child = d.file("gpusched-probe-" + UUID.randomUUID().toString().substring(0, 8));
        try {
            Files.createDirectory(child);
        } catch (IOException e) {
            throw new IsolationException("cgroup v1: cannot make a probe cgroup under " + cgroup + " to read its hidden"
                    + " denies: " + e.getMessage(), e);
        }
        try {
            Files.writeString(child.resolve("devices.deny"), "a");
            Map<Key, Integer> out = new LinkedHashMap<>();
            for (Key k : keys) {
                int denied = 0;
                for (int bit : new int[]{R, W, M}) {
                    try {
                        Files.writeString(child.resolve("devices.allow"), k.line(bit));
                    } catch (IOException e) {
                        if (e.getMessage() == null || !e.getMessage().contains("Operation not permitted")) {
                            throw e;
                        }
                        denied |= bit;
                    }
                }
                out.put(k, denied);
            }
            return out;
        } catch (IOException e) {
            throw new IsolationException("cgroup v1: probing the denies of " + cgroup + " failed: " + e.getMessage(),
                    e);
        } finally {
            try {
                Files.deleteIfExists(child);
            } catch (IOException e) {
                LOG.warn("cgroup v1: could not remove probe cgroup {}: {}", child, e.getMessage());
            }
        }
    }

    // ---- writing

    /** One rule write and the write that undoes it. */
    record Step(String file, String line, String undoFile, String undoLine) {
    }

    /**
     * Grants first, then removals.
     *
     * @param allowMode true when the maps are deny bits the fence adds to a default-allow cgroup, false when they are
     *                  the whole allow list of a default-deny cgroup
     */
    static List<Step> steps(Map<Key, Integer> from, Map<Key, Integer> to, boolean allowMode) {
        Map<Key, Integer> more = allowMode ? diff(from, to) : diff(to, from);
        Map<Key, Integer> less = allowMode ? diff(to, from) : diff(from, to);
        List<Step> out = new ArrayList<>();
        more.forEach((k, b) -> out.add(new Step("devices.allow", k.line(b), "devices.deny", k.line(b))));
        less.forEach((k, b) -> out.add(new Step("devices.deny", k.line(b), "devices.allow", k.line(b))));
        return out;
    }

    /** @return bits in a that b lacks */
    static Map<Key, Integer> diff(Map<Key, Integer> a, Map<Key, Integer> b) {
        Map<Key, Integer> out = new LinkedHashMap<>();
        a.forEach((k, bits) -> {
            int extra = bits & ~b.getOrDefault(k, 0);
            if (extra != 0) {
                out.put(k, extra);
            }
        });
        return out;
    }

    /**
     * Goes from {@code from} to {@code to} and reads the result back; on any failure rolls back and checks that
     * {@code from} is in force again.
     *
     * @throws IsolationException naming the step, and whether the rollback restored the previous state
     */
    private void transition(CgroupDir d, Map<Key, Integer> from, Map<Key, Integer> to, NodePlan p, String what) {
        List<Step> steps = steps(from, to, allowMode);
        List<Step> done = new ArrayList<>();
        try {
            for (Step s : steps) {
                write(d, s.file(), s.line(), p);
                done.add(s);
            }
            verify(d, to, p);
        } catch (IsolationException e) {
            String back;
            try {
                for (int i = done.size() - 1; i >= 0; i--) {
                    write(d, done.get(i).undoFile(), done.get(i).undoLine(), p);
                }
                verify(d, from, p);
                back = "; the " + done.size() + " rules written were undone and the previous rules are in force";
            } catch (IsolationException again) {
                back = "; undoing it failed too (" + again.getMessage() + "): the rules of " + cgroup + " are now"
                        + " unknown";
            }
            throw new IsolationException("cgroup v1: " + what + " of " + cgroup + " failed: " + e.getMessage() + back,
                    e);
        }
    }

    private void write(CgroupDir d, String file, String line, NodePlan p) {
        try {
            writer.write(d.file(file), line);
        } catch (IOException e) {
            String why = e.getMessage() == null ? e.toString() : e.getMessage();
            String host = file.equals("devices.allow") && why.contains("Operation not permitted")
                    ? parentRefuses(d, line, p) : "";
            throw new IsolationException(host + "writing '" + line + "' to " + cgroup.resolve(file) + " failed: " + why,
                    e);
        }
    }

    /** @return why the parent refused a grant: the node, its GPU, the parent and its rule, for the message */
    private String parentRefuses(CgroupDir d, String line, NodePlan p) {
        String[] f = line.split(" ");
        String[] mm = f[1].split(":");
        String node = "'" + line + "'";
        for (DeviceNode n : p.allowed()) {
            if (f[0].equals("c") && mm[0].equals(String.valueOf(n.major()))
                    && mm[1].equals(String.valueOf(n.minor()))) {
                node = owner.describe(n);
            }
        }
        Path parent = cgroup.getParent();
        String rule;
        try {
            State ps = parse(Files.readAllLines(d.file("..").resolve("devices.list")), parent);
            rule = ps.defaultAllow() ? "denies it (a deny exception; its devices.list does not show it: it is"
                    + " default-allow)"
                    : "has no rule allowing '" + line + "' (its devices.list: "
                            + String.join(", ", ps.exceptions().entrySet().stream().limit(12)
                                    .map(e -> e.getKey().line(e.getValue())).toList())
                            + (ps.exceptions().size() > 12 ? ", ..." : "") + ")";
        } catch (IOException | RuntimeException e) {
            rule = "refuses it (its devices.list could not be read: " + e.getMessage() + ")";
        }
        return "the host's policy denies " + node + " to " + cgroup + ": its parent cgroup " + parent + " " + rule
                + "; ";
    }

    /** Reads back: the whole list where it is visible, else the behavior and each planned node through a probe. */
    private void verify(CgroupDir d, Map<Key, Integer> expected, NodePlan p) {
        State now = read(d);
        if (!allowMode) {
            if (now.defaultAllow() || !now.exceptions().equals(expected)) {
                throw new IsolationException("read-back of " + cgroup.resolve("devices.list") + " shows "
                        + (now.defaultAllow() ? "a *:* rwm" : now.exceptions().size() + " rules differing from the "
                                + expected.size() + " expected: " + describeDiff(expected, now.exceptions())));
            }
            return;
        }
        if (!now.defaultAllow()) {
            throw new IsolationException("read-back of " + cgroup.resolve("devices.list")
                    + " no longer shows default-allow");
        }
        List<Key> keys = new ArrayList<>();
        for (DeviceNode n : concat(p.allowed(), p.denied())) {
            keys.add(key(n));
        }
        expected.keySet().stream().filter(k -> !keys.contains(k)).forEach(keys::add);
        Map<Key, Integer> seen = probe(d, keys);
        for (Key k : keys) {
            int want = expected.getOrDefault(k, 0) | hostDenied.getOrDefault(k, 0);
            if (seen.get(k) != want) {
                throw new IsolationException("read-back through a probe cgroup: " + k.line(RWM).replace(" rwm", "")
                        + " has denied bits '" + access(seen.get(k)) + "', expected '" + access(want) + "'");
            }
        }
    }

    private static String describeDiff(Map<Key, Integer> want, Map<Key, Integer> got) {
        List<String> out = new ArrayList<>();
        diff(got, want).forEach((k, b) -> out.add("extra " + k.line(b)));
        diff(want, got).forEach((k, b) -> out.add("missing " + k.line(b)));
        return String.join(", ", out.subList(0, Math.min(out.size(), 8))) + (out.size() > 8 ? ", ..." : "");
    }

    // ---- lifecycle

    /**
     * The cgroup is gone: its identity can never be fenced again, so its record and lock file go too (a revoke that
     * succeeded removed them under the lock already; removing a lock file outside the lock is safe only here).
     */
    @Override
    void gone() {
        if (id != null) {
            V1Record.delete(owner.stateDir, id);
            try {
                Files.deleteIfExists(CgroupLock.file(owner.stateDir, id));
            } catch (IOException e) {
                LOG.debug("could not remove lock file of {}: {}", cgroup, e.getMessage());
            }
        }
    }

    @Override
    void apply() {
        try (CgroupDir d = CgroupDir.open(cgroup, false)) {
            State s = read(d);
            allowMode = s.defaultAllow();
            if (allowMode && owner.strict) {
                throw new IsolationException("cgroup v1: " + cgroup + " is default-allow (a *:* rwm); a strict fence"
                        + " would have to write 'a' to come back and would lose the host's own denies, which the kernel"
                        + " does not list. Make the job cgroup default-deny first (echo a > devices.deny) or fence"
                        + " without strict");
            }
            if (allowMode) {
                host = Map.of();
                Map<Key, Integer> from = observe(d, recordedDenies(d), plan);
                Map<Key, Integer> to = target(plan, d);
                moveDenies(d, from, to, plan, "fencing");
                id = d.id;
                state = to;
                rules = rulesFor(plan);
                active = true;
                return;
            }
            boolean recorded = false;
            // a fence of another process (or a dead one) may have left its list: the host's is on record
            Optional<V1Record.Entry> rec = V1Record.read(owner.stateDir, d.id, cgroup);
            if (rec.isPresent() && rec.get().kind() == V1Record.Kind.OUR_DENIES) {
                // someone wrote 'a' to devices.deny since: the kernel dropped every deny a fence had added
                V1Record.delete(owner.stateDir, d.id);
                rec = Optional.empty();
            }
            host = rec.map(V1Record.Entry::rules).orElseGet(() -> Map.copyOf(s.exceptions()));
            Map<Key, Integer> to = target(plan, d);
            if (rec.isEmpty()) {
                V1Record.write(owner.stateDir, d.id, cgroup, V1Record.Kind.HOST_LIST, host);
                recorded = true;
            }
            try {
                transition(d, s.exceptions(), to, plan, "fencing");
            } catch (RuntimeException e) {
                if (recorded) {
                    V1Record.delete(owner.stateDir, d.id);
                }
                throw e;
            }
            id = d.id;
            state = to;
            rules = rulesFor(plan);
            active = true;
        }
    }

    @Override
    void replace(NodePlan next, List<DeviceRule> ignored) {
        try (CgroupDir d = CgroupDir.reopen(cgroup, false, id)) {
            State s = read(d);
            if (allowMode != s.defaultAllow()) {
                throw new IsolationException("cgroup v1: " + cgroup + " became " + (s.defaultAllow()
                        ? "default-allow under the fence; someone else wrote 'a' to devices.allow"
                        : "default-deny under the fence; someone else wrote 'a' to devices.deny"));
            }
            if (allowMode) {
                Map<Key, Integer> from = observe(d, recordedDenies(d), plan, next);
                Map<Key, Integer> to = target(next, d);
                moveDenies(d, from, to, next, "updating the fence");
                state = to;
            } else {
                Map<Key, Integer> to = target(next, d);
                transition(d, s.exceptions(), to, next, "updating the fence");
                state = to;
            }
            rules = rulesFor(next);
        }
    }

    @Override
    void remove() {
        try (CgroupDir d = CgroupDir.reopen(cgroup, false, id)) {
            if (allowMode) {
                Map<Key, Integer> from = observe(d, recordedDenies(d), plan);
                moveDenies(d, from, Map.of(), plan, "revoking the fence");
                state = Map.of();
                return;
            }
            transition(d, read(d).exceptions(), host, plan, "revoking the fence");
            state = host;
            if (!V1Record.delete(owner.stateDir, d.id)) {
                throw new IsolationException("cgroup v1: the host's list of " + cgroup + " is back, but its record "
                        + V1Record.file(owner.stateDir, d.id) + " could not be removed; the next fence would"
                        + " take it for the host's policy");
            }
        }
    }
}
