package io.gpusched.isolation;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * An emulator of the kernel's cgroup v1 device controller (security/device_cgroup.c): a behavior and an exception
 * list per cgroup; {@code a} switches behavior (EINVAL with children, EPERM to allow-all under a default-deny parent;
 * allow-all copies the parent's exceptions); a rule written to the file matching the behavior removes exactly-keyed
 * access bits, to the other file it adds them (merging an exact key); an allow added to a default-deny child needs
 * the parent's permission (a default-allow parent must have no exception overlapping any bit, a default-deny parent
 * one covering all of them), an allow that lifts a deny of a default-allow child must not overlap a parent's deny;
 * denies propagate to children. The access check: default-allow admits unless an exception overlaps; default-deny
 * admits when an exception covers. Checked against the real kernel by {@code V1KernelModelTest}; the fence's write
 * plans are checked against it.
 */
final class V1KernelModel {
    static final int ANY = DeviceRule.ANY;
    static final int OK = 0;
    static final int EPERM = 1;
    static final int EINVAL = 22;

    /** One exception. */
    static final class Ex {
        final char type;
        final int major;
        final int minor;
        int access;

        Ex(char type, int major, int minor, int access) {
            this.type = type;
            this.major = major;
            this.minor = minor;
            this.access = access;
        }

        String line() {
            return new V1Fence.Key(type, major, minor).line(access);
        }
    }

    /** One cgroup. */
    static final class Cg {
        final Cg parent;
        final List<Cg> children = new ArrayList<>();
        boolean allow;
        List<Ex> ex = new ArrayList<>();

        Cg(Cg parent) {
            this.parent = parent;
            if (parent == null) {
                allow = true;
            } else {
                allow = parent.allow;
                for (Ex e : parent.ex) {
                    ex.add(new Ex(e.type, e.major, e.minor, e.access));
                }
                parent.children.add(this);
            }
        }

        List<String> list() {
            if (allow) {
                return List.of("a *:* rwm");
            }
            return ex.stream().map(Ex::line).toList();
        }

        /** @return whether this cgroup admits an access to one device (no wildcards) */
        boolean admits(char type, int major, int minor, int access) {
            return allow ? !partial(ex, type, major, minor, access) : match(ex, type, major, minor, access);
        }
    }

    static boolean typeOk(Ex e, char type) {
        return e.type == type;
    }

    static boolean match(List<Ex> list, char type, int major, int minor, int access) {
        for (Ex e : list) {
            if (!typeOk(e, type)) {
                continue;
            }
            if (e.major != ANY && e.major != major) {
                continue;
            }
            if (e.minor != ANY && e.minor != minor) {
                continue;
            }
            if ((access & ~e.access) != 0) {
                continue;
            }
            return true;
        }
        return false;
    }

    static boolean partial(List<Ex> list, char type, int major, int minor, int access) {
        for (Ex e : list) {
            if (!typeOk(e, type)) {
                continue;
            }
            if (e.major != ANY && major != ANY && e.major != major) {
                continue;
            }
            if (e.minor != ANY && minor != ANY && e.minor != minor) {
                continue;
            }
            if ((access & e.access) == 0) {
                continue;
            }
            return true;
        }
        return false;
    }

    static boolean parentHasPerm(Cg c, Ex ex) {
        Cg p = c.parent;
        if (p == null) {
            return true;
        }
        if (p.allow) {
            // verify_new_ex: an exception of a default-allow child only restricts; one of a default-deny child grants
            return c.allow || !partial(p.ex, ex.type, ex.major, ex.minor, ex.access);
        }
        return match(p.ex, ex.type, ex.major, ex.minor, ex.access);
    }

    /** parent_allows_removal: a default-allow child may not drop a restriction its parent has, even partly. */
    static boolean parentAllowsRemoval(Cg c, Ex ex) {
        return c.parent == null || !c.allow || !partial(c.parent.ex, ex.type, ex.major, ex.minor, ex.access);
    }

    static void add(Cg c, Ex ex) {
        for (Ex e : c.ex) {
            if (e.type == ex.type && e.major == ex.major && e.minor == ex.minor) {
                e.access |= ex.access;
                return;
            }
        }
        c.ex.add(new Ex(ex.type, ex.major, ex.minor, ex.access));
    }

    static void rm(Cg c, Ex ex) {
        c.ex.removeIf(e -> {
            if (e.type == ex.type && e.major == ex.major && e.minor == ex.minor) {
                e.access &= ~ex.access;
                return e.access == 0;
            }
            return false;
        });
    }

    static void propagate(Cg c, Ex ex) {
        for (Cg child : c.children) {
            if (child.allow && c.allow) {
                add(child, ex);
            } else {
                rm(child, ex);
            }
            for (Ex e : List.copyOf(child.ex)) {
                if (!parentHasPerm(child, e)) {
                    rm(child, new Ex(e.type, e.major, e.minor, e.access));
                }
            }
            propagate(child, ex);
        }
    }

    /** @return OK, EPERM or EINVAL, as the kernel would answer writing {@code line} to {@code devices.<file>} */
    static int write(Cg c, boolean allowFile, String line) {
        if (line.startsWith("a")) {
            if (!c.children.isEmpty()) {
                return EINVAL;
            }
            if (allowFile) {
                if (c.parent != null && !c.parent.allow) {
                    return EPERM;
                }
                c.ex.clear();
                c.allow = true;
                if (c.parent != null) {
                    for (Ex e : c.parent.ex) {
                        c.ex.add(new Ex(e.type, e.major, e.minor, e.access));
                    }
                }
            } else {
                c.ex.clear();
                c.allow = false;
            }
            return OK;
        }
        String[] f = line.split(" ");
        String[] mm = f[1].split(":");
        Ex ex = new Ex(f[0].charAt(0), mm[0].equals("*") ? ANY : Integer.parseInt(mm[0]),
                mm[1].equals("*") ? ANY : Integer.parseInt(mm[1]), V1Fence.bits(f[2]));
        if (allowFile) {
            if (c.allow) {
                if (!parentAllowsRemoval(c, ex)) {
                    return EPERM;
                }
                rm(c, ex);
                return OK;
            }
            if (!parentHasPerm(c, ex)) {
                return EPERM;
            }
            add(c, ex);
            return OK;
        }
        if (!c.allow) {
            rm(c, ex);
        } else {
            add(c, ex);
        }
        propagate(c, ex);
        return OK;
    }

    /** @return the exceptions as the fence's map */
    static Map<V1Fence.Key, Integer> map(Cg c) {
        Map<V1Fence.Key, Integer> out = new LinkedHashMap<>();
        for (Ex e : c.ex) {
            out.merge(new V1Fence.Key(e.type, e.major, e.minor), e.access, (a, b) -> a | b);
        }
        return out;
    }
}
