# bash completion for pipelinectl(1): verbs, options, run names, job names,
# stage names and spec files. The names come from pipelinectl itself
# (`pipelinectl _complete ...`), so they follow its table of verbs and the
# daemon's runs; with no daemon running only verbs, options and files are
# offered. Installed as share/bash-completion/completions/pipelinectl.

_pipelinectl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local -a global=() pos=()
	local verb="" i w
	# The global options before the verb go along to every helper call.
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [ -z "$verb" ]; then
			case "$w" in
			-f|-s|-F) global+=("$w" "${COMP_WORDS[i+1]}"); i=$((i + 1)); continue;;
			--json) continue;;
			-*) continue;;
			esac
			verb=$w
			continue
		fi
		case "$w" in
		--vs|--job|--size|--name|-o|-w) i=$((i + 1));;
		-*) ;;
		*) pos+=("$w");;
		esac
	done
	local ctl=${COMP_WORDS[0]}
	if [ -z "$verb" ]; then
		case "$prev" in
		-f) COMPREPLY=($(compgen -f -- "$cur")); return;;
		-s|-F) COMPREPLY=($(compgen -f -- "$cur")); return;;
		esac
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "-f -s -F --json --help --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$("$ctl" _complete 2>/dev/null)" -- "$cur"))
		fi
		return
	fi
	case "$prev" in
	--vs) COMPREPLY=($(compgen -W "$("$ctl" "${global[@]}" _complete runs 2>/dev/null)" -- "$cur")); return;;
	--job) [ ${#pos[@]} -ge 1 ] && COMPREPLY=($(compgen -W "$("$ctl" "${global[@]}" _complete jobs "${pos[0]}" 2>/dev/null)" -- "$cur")); return;;
	-o|-w) COMPREPLY=($(compgen -f -- "$cur")); return;;
	--name|--size) return;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$("$ctl" _complete opts "$verb" 2>/dev/null)" -- "$cur"))
		return
	fi
	local what
	what=$("$ctl" _complete pos "$verb" $((${#pos[@]} + 1)) 2>/dev/null)
	case "$what" in
	RUN) COMPREPLY=($(compgen -W "$("$ctl" "${global[@]}" _complete runs 2>/dev/null)" -- "$cur"));;
	JOB) COMPREPLY=($(compgen -W "$("$ctl" "${global[@]}" _complete jobs "${pos[0]}" 2>/dev/null)" -- "$cur"));;
	VERB) COMPREPLY=($(compgen -W "$("$ctl" _complete 2>/dev/null)" -- "$cur"));;
	STAGE) COMPREPLY=($(compgen -W "$("$ctl" "${global[@]}" _complete stages 2>/dev/null)" -- "$cur"));;
	SPEC|FILE) COMPREPLY=($(compgen -f -- "$cur"));;
	esac
}
complete -o default -F _pipelinectl pipelinectl
