/** `/signin` and `/signup`, and the header's user menu (who is signed in, sign out). */
import { h, replace } from "../dom";
import { linkTo } from "../router";
import { auth, currentUser } from "../reviewapi";
import { afterSignIn } from "../urlstate";

export function authPage(kind: "signin" | "signup", next?: string): HTMLElement {
  const user = h("input", { name: "username", autocomplete: "username", required: true, "aria-label": "Username" });
  const pass = h("input", { name: "password", type: "password", autocomplete: kind === "signin" ? "current-password" : "new-password", required: true, "aria-label": "Password" });
  const err = h("p", { class: "error auth-error", role: "alert" });
  const go = h("button", { class: "btn primary", type: "submit" }, kind === "signin" ? "Sign in" : "Create account");
  const form = h("form", { class: "auth-form" }, h("label", null, "Username ", user), h("label", null, "Password ", pass), go, err);
  const label = go.textContent ?? "";
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    go.disabled = true;
    go.textContent = kind === "signin" ? "Signing in…" : "Creating the account…";
    replace(err);
    try {
      await (kind === "signin" ? auth.login(user.value, pass.value) : auth.signup(user.value, pass.value));
      // replace, not assign: Back does not return to the form, and the address bar leaves /signin at once
      location.replace(afterSignIn(next));
    } catch (x) {
      go.disabled = false;
      go.textContent = label;
      replace(err, x instanceof Error ? x.message : String(x));
    }
  });
  // Already signed in (a bookmarked /signin, Back into it): on to where the form would have gone.
  void currentUser().then((me) => {
    if (me.user) location.replace(afterSignIn(next));
  });
  const other = kind === "signin"
    ? h("p", { class: "muted" }, "No account? ", linkTo(h("a", null, "Create one"), { page: "signup", next }))
    : h("p", { class: "muted" }, "Have an account? ", linkTo(h("a", null, "Sign in"), { page: "signin", next }));
  document.title = `${kind === "signin" ? "Sign in" : "Sign up"} — Prism`;
  return h("main", { class: "start auth" }, linkTo(h("a", { class: "brand" }, "Prism"), { page: "start" }), h("h1", null, kind === "signin" ? "Sign in" : "Create an account"), form, other);
}

/** "ada · Sign out", or "Sign in" (with a way back to this page). */
export function userMenu(): HTMLElement {
  const el = h("span", { class: "user-menu" });
  void currentUser().then((me) => {
    if (me.user) {
      const out = h("button", { class: "btn small sign-out" }, "Sign out");
      out.addEventListener("click", () => void auth.logout().then(() => location.reload()));
      replace(el, h("span", { class: "signed-in" }, me.user.username), " ", out);
    } else {
      const a = h("a", { class: "sign-in", href: `/signin?next=${encodeURIComponent(location.pathname + location.search)}` }, "Sign in");
      replace(el, a);
    }
  });
  return el;
}
