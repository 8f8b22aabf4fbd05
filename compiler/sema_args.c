/* sema_args.c - a call's arguments bound to what the callee takes
 * (positional, then by name), and the messages about them: an unknown
 * name lists the arguments with a "did you mean" (sema_hints.c), a value
 * of the wrong kind is named and underlined (sema_arg_at). */
#include <stdio.h>
#include <string.h>

#include "sema_int.h"

void sema_unknown_arg(sema *S, const ast_node *kw, const char *fname, const argspec *spec,
                      int n_spec)
{
    char have[400] = "";
    size_t len = 0;
    const char *best = NULL;
    int bd = 4;
    for (int i = 0; i < n_spec && len < sizeof have; i++) {
        len += (size_t)snprintf(have + len, sizeof have - len, "%s%s", i ? ", " : "", spec[i].name);
        sema_closer(kw->name, spec[i].name, &best, &bd);
    }
    if (!best) best = sema_arg_alias(kw->name, spec, n_spec);
    if (n_spec == 0)
        sema_err(S, kw, "%s() has no argument named '%s' (it takes none by name)", fname, kw->name);
    else if (best)
        sema_err(S, kw, "%s() has no argument named '%s'; did you mean '%s'? (it takes %s)", fname,
                 kw->name, best, have);
    else
        sema_err(S, kw, "%s() has no argument named '%s' (it takes %s)", fname, kw->name, have);
}

int sema_bind_args(sema *S, const char *fname, const argspec *spec, int n_spec,
                   const sema_args *args, int skip, value *out)
{
    int n_pos = args->n_pos - skip;
    for (int i = 0; i < n_spec; i++) out[i] = (value){.k = V_NONE};
    if (n_pos > n_spec) {
        sema_err(S, args->call, "%s() takes at most %d positional arguments, got %d", fname, n_spec,
                 n_pos);
        return -1;
    }
    for (int i = 0; i < n_pos; i++) {
        out[i] = args->pos[skip + i];
        out[i].arg_at = args->pos_at[skip + i];
    }
    for (int k = 0; k < args->n_kw; k++) {
        const ast_node *kw = args->kw_at[k];
        int i = 0;
        while (i < n_spec && strcmp(spec[i].name, kw->name) != 0) i++;
        if (i == n_spec) {
            sema_unknown_arg(S, kw, fname, spec, n_spec);
            return -1;
        }
        if (i < n_pos) {
            sema_err(S, kw, "%s() got two values for argument '%s'", fname, kw->name);
            sema_note(S, args->pos_at[skip + i], "'%s' was first given here, by position",
                      kw->name);
            return -1;
        }
        out[i] = args->kw[k];
        out[i].arg_at = kw;
    }
    for (int i = 0; i < n_spec; i++)
        if (out[i].k != V_NONE) out[i].arg_fn = fname, out[i].arg_name = spec[i].name;
    for (int i = 0; i < n_spec; i++)
        if (spec[i].required && out[i].k == V_NONE) {
            sema_err(S, args->call, "%s() is missing argument '%s'", fname, spec[i].name);
            return -1;
        }
    return 0;
}

int sema_num_arg(sema *S, const ast_node *at, value v, double def, double *out)
{
    if (v.k == V_NONE) {
        *out = def;
        return 0;
    }
    if (v.k != V_NUM && v.k != V_BOOL) {
        char lb[96];
        const char *label = sema_arg_label(&v, lb, sizeof lb);
        if (label)
            sema_err(S, sema_arg_at(&v, at), "%s must be a number, got %s", label,
                     sema_value_kind(&v));
        else
            sema_err(S, at, "expected a number, got %s", sema_value_kind(&v));
        return -1;
    }
    *out = v.num;
    return 0;
}

int sema_bool_arg(sema *S, const ast_node *at, value v, int def, int *out)
{
    if (v.k == V_NONE) {
        *out = def;
        return 0;
    }
    if (v.k != V_BOOL && !(v.k == V_NUM && v.is_int)) {
        char lb[96];
        const char *label = sema_arg_label(&v, lb, sizeof lb);
        sema_err(S, sema_arg_at(&v, at), "%s must be true or false, got %s",
                 label ? label : "the argument", sema_value_kind(&v));
        return -1;
    }
    *out = v.num != 0;
    return 0;
}
