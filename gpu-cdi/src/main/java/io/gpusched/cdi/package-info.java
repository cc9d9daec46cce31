/**
 * CDI specs and container device flags from a gpusched inventory. Start at {@link io.gpusched.cdi.CdiSpec} (a node's
 * spec for {@code /etc/cdi}) and {@link io.gpusched.cdi.ContainerDevices} (one allocation's flags, names and env).
 */
package io.gpusched.cdi;
